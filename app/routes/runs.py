"""Runs: the list (`/`, JSON `/api/runs`), one run (`/runs/{id}`, JSON `/api/runs/{id}`), its steps."""

from __future__ import annotations

from typing import Annotated, Any, Literal, Optional
from urllib.parse import unquote

from fastapi import APIRouter, Depends, Path, Query, Request
from fastapi.responses import RedirectResponse, Response, StreamingResponse

from .. import export, fields, walk
from ..deps import RunDep, RunRowDep, SessionDep, SettingsDep
from ..errors import BoardError
from ..notfound import missing_run
from ..queries import live, run_detail, run_list
from ..queries.pointers import MAX_POINTER_CHARS, parse_pointer
from ..render import JSONResponse, is_htmx, past_end, respond, wants_json
from ..run_view import public, run_header
from ..urls import masked_query, run_path
from ..words import plural

router = APIRouter(tags=["runs"])

STATES = ("running", "abandoned", "finished")
VERDICTS = ("pass", "fail", "error", "not_graded", "none")


def _bool(value: Optional[str]) -> Optional[bool]:
    if value in (None, "", "any"):
        return None
    if value.lower() in ("true", "1", "yes", "on"):
        return True
    if value.lower() in ("false", "0", "no", "off"):
        return False
    raise BoardError(f"early_stopped must be true or false, not {value[:40]!r}")


def run_filters(
    q: Annotated[Optional[str], Query(max_length=500, description="Search run id, task id, objective, final result, stop detail")] = None,
    experiment: Optional[str] = None,
    variant: Optional[str] = None,
    state: Annotated[Optional[str], Query(description="running, abandoned or finished")] = None,
    stop_reason: Optional[str] = None,
    verdict: Annotated[Optional[str], Query(description="pass, fail, error, not_graded or none (no verdict yet)")] = None,
    early_stopped: Annotated[Optional[str], Query(description="true or false")] = None,
    model: Optional[str] = None,
    tag: Optional[str] = None,
    task_id: Optional[str] = None,
    sort: Literal["started", "steps", "tokens", "duration", "run_id"] = "started",
    order: Literal["asc", "desc"] = "desc",
    offset: Annotated[int, Query(ge=0, le=10_000_000)] = 0,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
) -> run_list.RunFilters:
    """The list's query parameters as one object (an empty value means "any", as the form sends it)."""
    if state and state not in STATES:
        raise BoardError(f"state must be one of {', '.join(STATES)}")
    if verdict and verdict not in VERDICTS:
        raise BoardError(f"verdict must be one of {', '.join(VERDICTS)}")
    return run_list.RunFilters(q=q or None, experiment=experiment or None, variant=variant or None, state=state,
                              stop_reason=stop_reason or None, verdict=verdict, early_stopped=_bool(early_stopped),
                              model=model or None, tag=tag or None, task_id=task_id or None, sort=sort, order=order,
                              offset=offset, limit=limit)


FiltersDep = Annotated[run_list.RunFilters, Depends(run_filters)]
#: The runs list's query parameters (a link to / carrying one of them means the list).
LIST_PARAMS = frozenset({"q", "experiment", "variant", "state", "stop_reason", "verdict", "early_stopped", "model", "tag",
                         "task_id", "sort", "order", "offset", "limit"})


@router.get("/runs", include_in_schema=False)
@router.get("/api/runs", summary="List runs")
def list_runs(request: Request, session: SessionDep, filters: FiltersDep) -> Any:
    """Runs matching the search and filters, one page, with figures for the whole filtered set."""
    rows, count = run_list.list_runs(session, filters=filters)
    moved = past_end(request, offset=filters.offset, total=count, limit=filters.limit,
                     what=plural(count, "run") + " match", query=list(filters.as_params().items()))
    if moved is not None:
        return moved
    data = {
        "data": [public(r) for r in rows],
        "count": count,
        "offset": filters.offset,
        "limit": filters.limit,
        "filters": filters.as_params(),
        "stats": run_list.run_stats(session, filters=filters),
        "version": request.app.state.writer.version,
    }
    page = not request.url.path.startswith("/api/")
    context = {"filters": filters, "facets": run_list.facet_values(session) if page else {},
               "live_stamp": live.runs_live_stamp(session) if page else ""}
    response = respond(request, "runs.html", data, fragment="_runs_results.html", context=context)
    if request.headers.get("hx-trigger") == "filters":
        # The form sends every field, empty ones too: keep the shared URL to what is set.
        query = masked_query(filters.as_params())
        response.headers["HX-Push-Url"] = "/runs" + ("?" + query if query else "")
    return response


OnlyDep = Annotated[Optional[list[str]], Query(description="only steps where: critic (a critic said retry or stop), "
                                                           "decided (a criterion was decided), errors (something failed)")]


def _kinds(only: Optional[list[str]]) -> list[str]:
    """The step filter's kinds; an unknown one is a 400 naming the valid ones."""
    values = [v for raw in (only or []) for v in raw.split(",") if v]
    unknown = [v for v in values if v not in walk.KINDS]
    if unknown:
        raise BoardError(f"only must be among {', '.join(walk.KINDS)}, not {unknown[0][:40]!r}",
                         details={"valid": list(walk.KINDS)})
    return walk.clean_kinds(values)


@router.get("/runs/{run_id:runid}", include_in_schema=False)
@router.get("/api/runs/{run_id:runid}", summary="One run with its criteria and early-stop record")
def get_run(request: Request, session: SessionDep, settings: SettingsDep, row: RunRowDep,
            from_step: Annotated[Optional[int], Query(alias="from", ge=0, le=100_000_000)] = None,
            only: OnlyDep = None) -> Any:
    """One run: header, criteria, early-stop record, verdict lane (steps come from /steps)."""
    kinds = _kinds(only)
    data = run_header(session, row=row)
    pk = data.pop("_pk")
    updated = data.pop("_updated_at")
    data["live"] = {"stamp": live.run_stamp(row), "poll_s": settings.live_poll_s}
    flagged = walk.flagged_steps(session, run_pk=pk, updated_at=updated)
    data["walk"] = {"only": kinds, **{k: flagged[k] for k in walk.KINDS}}
    first = min(settings.first_page_steps, settings.page_steps)
    where = {"run_pk": pk, "updated_at": updated, "kinds": kinds}
    offset = walk.position_of(session, **where, step=from_step) if from_step else 0
    steps, total = walk.step_block(session, **where, offset=offset, limit=first)
    if from_step is not None and not steps and total:
        # Past the last step: say so, and show the run's last block rather than nothing.
        last = walk.step_at(session, **where, position=total - 1)
        data["notice"] = (f"there is no step {from_step} or later{' among the chosen steps' if kinds else ''}: "
                          f"the last is step {last}; showing the last steps")
        offset = max(0, total - first)
        steps, total = walk.step_block(session, **where, offset=offset, limit=first)
    # The first block is short so the page opens fast; scrolling loads full blocks. Its
    # first step opens in full (or the step asked for); the others show one line each.
    opened = steps[0]["step"] if steps else None
    if from_step is not None and any(s["step"] == from_step for s in steps):
        opened = from_step
    context = {"steps": steps, "steps_total": total, "offset": offset, "limit": first, "next_limit": settings.page_steps,
               "kinds": kinds, "opened": opened, "run_steps": data["run"]["steps"]}
    if offset > 0:
        # The block before this one ends at the step just above the first shown ("k" and
        # "earlier steps" land there), whatever gaps the step numbers have.
        context["earlier_from"] = walk.step_at(session, **where, position=max(0, offset - first))
        context["prev_step"] = walk.step_at(session, **where, position=offset - 1)
    return respond(request, "run.html", data, fragment="_run_header.html", context=context)


@router.get("/runs/{run_id:runid}/steps", include_in_schema=False)
@router.get("/api/runs/{run_id:runid}/steps", summary="A block of a run's steps with their critic outputs")
def get_steps(request: Request, session: SessionDep, settings: SettingsDep, row: RunRowDep,
              offset: Annotated[int, Query(ge=0, le=100_000_000)] = 0,
              limit: Annotated[Optional[int], Query(ge=1, le=200)] = None, only: OnlyDep = None) -> Any:
    """Steps `offset` to `offset + limit` of the run (or of the steps `only` picks), each with every critic output and its events."""
    kinds = _kinds(only)
    limit = limit or settings.page_steps
    steps, total = walk.step_block(session, run_pk=row["id"], updated_at=row["updated_at"], kinds=kinds,
                                   offset=offset, limit=limit)
    if offset and offset >= total:
        what = "steps of the chosen kinds" if kinds else "steps"
        raise BoardError(f"offset {offset} is past the end: the run has {total} {what} (offsets 0 to {max(0, total - 1)})",
                         status=404, details={"count": total, "only": kinds})
    data = {"data": steps, "count": total, "offset": offset, "limit": limit, "only": kinds}
    context = {"run": public(row), "steps": steps, "steps_total": total, "offset": offset, "limit": limit,
               "kinds": kinds, "opened": None}
    return respond(request, "steps.html", data, fragment="_steps.html", context=context)


@router.get("/runs/{run_id:runid}/calls/{call}", include_in_schema=False)
@router.get("/api/runs/{run_id:runid}/calls/{call}", summary="The step that made a tool call (1-based across the run)")
def get_call(request: Request, session: SessionDep, row: RunDep, run_id: str,
             call: Annotated[int, Path(ge=1, le=100_000_000)]) -> Any:
    """Where criterion evidence such as `tool_call_indexes: [3]` points: the page opens at that step."""
    step, seen = walk.step_of_call(session, run_pk=row["pk"], call=call)
    if step is None:
        raise BoardError(f"tool call #{call} is not in run {run_id!r}: its steps record {seen} tool call"
                         f"{'' if seen == 1 else 's'}", status=404, details={"calls": seen})
    if wants_json(request):
        return JSONResponse({"run_id": run_id, "call": call, "step": step})
    return RedirectResponse(run_path(run_id, f"?from={step}#step-{step}"), status_code=303)


@router.get("/runs/{run_id:runid}/steps/{step}/field", include_in_schema=False)
@router.get("/api/runs/{run_id:runid}/steps/{step}/field", summary="One full value inside a step's stored record")
def get_field(request: Request, session: SessionDep, row: RunDep, run_id: str, step: Annotated[int, Path(ge=0, le=100_000_000)],
              path: Annotated[str, Query(max_length=MAX_POINTER_CHARS,
                                         description="JSON pointer into the stored record, e.g. /observation")] = "",
              event: Annotated[Optional[int], Query(ge=0, le=1_000_000, description="the step's n-th event instead")] = None) -> Any:
    """The whole value a page showed cut (loaded when the reader asks for it)."""
    return _field(request, session, row, step=step, path=path, event=event, missing="no such value in this step",
                  lookup=lambda pk: run_detail.get_step_field(session, run_pk=pk, step=step, pointer=path, event=event))


@router.get("/runs/{run_id:runid}/field", include_in_schema=False)
@router.get("/api/runs/{run_id:runid}/field", summary="One full value of the run outside its steps")
def get_run_field(request: Request, session: SessionDep, row: RunDep,
                  path: Annotated[str, Query(max_length=MAX_POINTER_CHARS,
                                             description="JSON pointer: /run/meta/..., /criteria/<id>/details, "
                                                         "/run_events/<n>/...")] = "") -> Any:
    """The whole run-level value a page showed cut (criterion details, metadata, run events)."""
    return _field(request, session, row, step=None, path=path, event=None, missing="no such value in this run",
                  lookup=lambda pk: run_detail.get_run_field(session, run_pk=pk, pointer=path))


def _field(request: Request, session, row: dict[str, Any], *, step: Optional[int], path: str, event: Optional[int],
           missing: str, lookup) -> Any:
    """One stored value by JSON pointer, as a fragment or JSON; a bad pointer is a 400, a missing value a 404.

    The value is masked by the keys it was stored under (the pointer's tokens): a password fetched
    on its own is still a password.
    """
    gate = fields.gate_for(session, run_pk=row["pk"], step=step, event=event)
    if not gate.acquire(timeout=fields.GATE_WAIT_S):
        raise BoardError("another large step record is being read: try again in a moment", status=503)
    release = fields.once(gate.release)
    handed = False  # respond_long releases the gate itself, once its answer is sent
    try:
        try:
            key_path = parse_pointer(path)
            value = lookup(row["pk"])
        except ValueError as exc:
            raise BoardError(f"bad path: {exc}", status=400) from None
        except KeyError:
            raise BoardError(missing, status=404) from None
        data = {"run_id": row["run_id"], "step": step, "path": path, "event": event, "value": value}
        if not fields.is_long(value):
            return respond(request, "field.html", data, fragment="_field.html", value_path=("value", key_path))
        response = fields.respond_long(request, data, key_path, release=release)
        handed = True
        return response
    finally:
        if not handed:
            release()


@router.get("/runs/{run_id:runid}/live", include_in_schema=False)
@router.get("/api/runs/{run_id:runid}/live", summary="Whether a run changed since `stamp`, and its new steps")
def run_live(request: Request, session: SessionDep, settings: SettingsDep, found: RunDep,
             stamp: Annotated[str, Query(max_length=200)] = "",
             after: Annotated[Optional[int], Query(ge=-1, le=100_000_000, description="last step the page shows")] = None,
             only: OnlyDep = None) -> Any:
    """Polled by an open run page: 204 while nothing changed, else the new header and steps."""
    if not is_htmx(request) and not wants_json(request):
        # the poll answers a fragment of the run page; opened by itself, that page is the answer
        return RedirectResponse(run_path(found["run_id"]), status_code=303)
    if found["stamp"] == stamp:
        return Response(status_code=204)
    kinds = _kinds(only)
    row = run_detail.get_run_row(session, run_id=found["run_id"])
    if row is None:  # removed since the lookup: nothing new to show
        return Response(status_code=204)
    data = run_header(session, row=row)
    pk = data.pop("_pk")
    updated = data.pop("_updated_at")
    data["live"] = {"stamp": found["stamp"], "poll_s": settings.live_poll_s}
    flagged = walk.flagged_steps(session, run_pk=pk, updated_at=updated)
    data["walk"] = {"only": kinds, **{k: flagged[k] for k in walk.KINDS}}
    steps: list[dict[str, Any]] = []
    total, offset = found["steps"], 0
    if after is not None:
        where = {"run_pk": pk, "updated_at": updated, "kinds": kinds}
        offset = walk.position_of(session, **where, step=after + 1)
        steps, total = walk.step_block(session, **where, offset=offset, limit=settings.page_steps)
    data["new_steps"] = [s["step"] for s in steps]
    context = {"steps": steps, "steps_total": total, "offset": offset, "limit": settings.page_steps, "kinds": kinds,
               "opened": None}
    return respond(request, "run.html", data, fragment="_run_live.html", context=context)


@router.get("/live/runs", include_in_schema=False)
@router.get("/api/live/runs", summary="Whether any run changed since `stamp`")
def runs_live(request: Request, session: SessionDep, settings: SettingsDep,
              stamp: Annotated[str, Query(max_length=200)] = "") -> Any:
    """Polled by the runs list: 204 while nothing changed, else a new stamp and an event that refreshes the table."""
    current = live.runs_live_stamp(session)
    if current == stamp:
        return Response(status_code=204)
    response = respond(request, "runs_live.html", {"stamp": current, "poll_s": settings.live_poll_s},
                       fragment="_runs_live.html")
    response.headers["HX-Trigger"] = "qita-runs-changed"
    return response


@router.get("/runs/{run_id:runid}/export.html", summary="The run as one standalone HTML file")
def export_html(request: Request, settings: SettingsDep, _run: RunDep, run_id: str) -> Any:
    """Opens from disk with no server and no network request."""
    body = export.render_export_html(request.app.state.engine, run_id, templates=request.app.state.templates,
                                     settings=settings, reveal=export.reveal_for(request))
    return StreamingResponse(body, media_type="text/html; charset=utf-8",
                             headers={"Content-Disposition": export.disposition(run_id, "html")})


@router.get("/runs/{run_id:runid}/export.jsonl", summary="The run's records in the v1 format")
def export_jsonl(request: Request, _run: RunDep, run_id: str) -> Any:
    """One record per line: run_start, steps with their events, criteria, early_stop, run_end."""
    return StreamingResponse(export.export_jsonl(request.app.state.engine, run_id, reveal=export.reveal_for(request)),
                             media_type="application/x-ndjson",
                             headers={"Content-Disposition": export.disposition(run_id, "jsonl")})


@router.get("/runs/{run_id:runid}/steps/{step}/events", include_in_schema=False)
@router.get("/api/runs/{run_id:runid}/steps/{step}/events", summary="One step's events, in order")
def get_step_events(request: Request, session: SessionDep, row: RunDep, run_id: str,
                    step: Annotated[int, Path(ge=0, le=100_000_000)]) -> Any:
    """The phase timeline of one step (loaded when the reader opens it)."""
    events = run_detail.get_step_events(session, run_pk=row["pk"], step=step)
    return respond(request, "events.html", {"data": events, "count": len(events)}, fragment="_events.html",
                   context={"events": events, "run_id": run_id, "step": step})


# -- a run id typed with its slashes --------------------------------------------------------

#: Mounted after every other router: it answers only paths no route of a run matched.
fallback = APIRouter()

#: The pages under a run a typed path may end with (the run id is what comes before);
#: the exports have no /api twin.
_SUFFIXES = ("/steps", "/live", "/delete", "/field")
_PAGE_SUFFIXES = ("/export.html", "/export.jsonl")


@fallback.api_route("/runs/{rest:path}", methods=["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"], include_in_schema=False)
@fallback.api_route("/api/runs/{rest:path}", methods=["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"],
                    include_in_schema=False)
def typed_run_path(request: Request, session: SessionDep, rest: str) -> Any:
    """A run id typed with its `/` unencoded (coder_eval's hold three): its page, else the 404 with the nearest ids."""
    if request.method not in ("GET", "HEAD"):
        raise BoardError("no such page", status=404)
    api = request.url.path.startswith("/api/")
    query = "?" + request.url.query if request.url.query else ""
    typed = unquote(rest)
    if not typed or typed.endswith("/"):
        # a trailing slash (Starlette's own redirect for it is shadowed by this route)
        return RedirectResponse(request.url.path.rstrip("/") + query, status_code=307)
    suffixes = _SUFFIXES if api else _SUFFIXES + _PAGE_SUFFIXES
    for run_id, suffix in [(typed, ""), *((typed[:-len(s)], s) for s in suffixes if typed.endswith(s))]:
        if run_id and "\x00" not in run_id and live.find_run(session, run_id=run_id) is not None:
            target = ("/api" if api else "") + run_path(run_id, suffix)
            if target == request.url.path:
                break  # the route this names did not match it: never redirect to the same place
            return RedirectResponse(target + query, status_code=307)
    parts = typed.split("/")
    if any(live.find_run(session, run_id="/".join(parts[:i])) is not None for i in range(1, len(parts)) if "\x00" not in typed):
        raise BoardError("no such page", status=404)  # a run's id with something after it no route has
    raise missing_run(session, typed)
