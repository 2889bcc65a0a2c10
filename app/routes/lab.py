"""The early-stop policy lab (`/lab`, JSON `/api/lab`) and its frontier (`/lab/frontier`, `/api/lab/frontier`)."""

from __future__ import annotations

from typing import Annotated, Any, Literal, Optional
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import PlainTextResponse

from ..deps import SessionDep
from ..errors import BoardError
from ..lab import export, view
from ..queries.run_list import RunFilters
from ..render import past_end, respond
from ..secrets import Masker
from ..urls import masked_query
from ..words import plural

router = APIRouter(tags=["lab"])

Text = Annotated[Optional[str], Query(max_length=400)]
#: numbers from the form, where an empty field means "none"
Number = Annotated[Optional[str], Query(max_length=40)]
Measure = Literal["tokens", "steps", "agent_s", "cost_usd", "elapsed_s", "tool_calls"]


def set_filters(q: Annotated[Optional[str], Query(max_length=500)] = None, experiment: Text = None,
                variant: Text = None, stop_reason: Text = None, model: Text = None, tag: Text = None,
                task_id: Text = None) -> RunFilters:
    """The set of runs to simulate over, as the runs list filters it (finished full runs only)."""
    return RunFilters(q=q or None, experiment=experiment or None, variant=variant or None,
                              stop_reason=stop_reason or None, model=model or None, tag=tag or None,
                              task_id=task_id or None)


SetDep = Annotated[RunFilters, Depends(set_filters)]


def policy_args(arm: Annotated[list[str], Query(max_length=600, description=(
                    "CRITERION_ID:pass|fail|decided, repeated (the last colon separates)"))] = [],
                declared: Annotated[bool, Query(description="arm each run as its own criteria declare")] = False,
                without: Annotated[list[str], Query(max_length=600, description=(
                    "with declared: a criterion left unarmed (repeated)"))] = [],
                rule: Literal["auto", "all", "gate"] = "auto", min_steps: Number = None, max_steps: Number = None,
                max_tokens: Number = None, max_seconds: Number = None,
                policy: Annotated[Optional[str], Query(max_length=10, description=(
                    "set by the form: an empty arming then means nothing armed"))] = None) -> view.PolicyArgs:
    """The policy as the request gives it."""
    if len(arm) > 100 or len(without) > 100:
        raise BoardError("arm (or leave out) at most 100 criteria")
    return view.PolicyArgs(arm=arm, declared=declared, without=without, rule=rule,
                           min_steps=_number("min_steps", min_steps, whole=True),
                           max_steps=_number("max_steps", max_steps, whole=True),
                           max_tokens=_number("max_tokens", max_tokens), max_seconds=_number("max_seconds", max_seconds),
                           chosen=bool(policy))


def _number(name: str, value: Optional[str], *, whole: bool = False) -> Any:
    """A form's number: empty is none; anything else must be a finite number (whole for step counts)."""
    if value is None or not value.strip():
        return None
    try:
        number = float(value)
    except ValueError:
        raise BoardError(f"{name} must be a number, not {value[:40]!r}") from None
    if number != number or number in (float("inf"), float("-inf")) or not 0 <= number <= 1e15:
        raise BoardError(f"{name} must be a number from 0 to 1e15, not {value[:40]!r}")
    if whole:
        if not number.is_integer():
            raise BoardError(f"{name} must be a whole number of steps, not {value[:40]!r}")
        return int(number)
    return number


PolicyDep = Annotated[view.PolicyArgs, Depends(policy_args)]


def _query(data: dict[str, Any], **extra: Any) -> str:
    return masked_query({**data["set"]["filters"], **extra}, doseq=True)


@router.get("/lab", include_in_schema=False)
@router.get("/api/lab", summary="Simulate an early-stop policy over recorded full runs")
def lab_view(request: Request, session: SessionDep, filters: SetDep, args: PolicyDep,
             sort: Literal["task", "savings", "disagreement"] = "task", only: Optional[Literal["disagree", ""]] = None,
             offset: Annotated[int, Query(ge=0, le=10_000_000)] = 0,
             limit: Annotated[Optional[int], Query(ge=1, le=100_000)] = None, measure: Measure = "tokens",
             format: Optional[Literal["json", "md", ""]] = None) -> Any:
    """A policy's simulated stops, verdicts and savings over a set, with validation, frontier and calibration."""
    page = not request.url.path.startswith("/api/") and format not in ("json", "md")
    # The frontier simulates twenty-odd policies: the page loads it after the rest, from
    # /lab/frontier (JSON /api/lab/frontier); only the Markdown report carries it along.
    data = view.lab(session, filters=filters, args=args, sort=sort, only=only or "", offset=offset,
                    limit=limit or (view.PAGE_PAIRS if page else None), with_frontier=format == "md",
                    measure=measure, indexer=getattr(request.app.state, "lab_indexer", None))
    # While runs are still being indexed the pairs are not all there yet: no page is past the end.
    total = data["pairs_total"]
    moved = data["indexing"]["ready"] and past_end(
        request, offset=offset, total=total, limit=limit or (view.PAGE_PAIRS if page else None),
        what=plural(total, "paired task"))
    if moved:
        return moved
    data["frontier_url"] = f"/api/lab/frontier?{_query(data, measure=measure)}"
    if format == "md":
        from ..security import reveal_state

        shown = data if reveal_state(request).shown else Masker().data(data)
        return PlainTextResponse(export.markdown(shown, base_url=str(request.base_url)),
                                 media_type="text/markdown; charset=utf-8")
    policy_query = urlencode(data["policy_params"], doseq=True)
    context = {"sort": sort, "only": only or "", "measure": measure, "limit": limit or view.PAGE_PAIRS,
               "set_query": _query(data), "policy_query": policy_query, "self_query": request.url.query,
               "experiments": view.lq.experiments_with_variants(session)}
    # htmx asks for the table (sorting, paging) or, while runs are being indexed, the whole page
    fragment = "_lab_table.html" if request.headers.get("hx-target") == "lab-pairs" else None
    response = respond(request, "lab.html", data, fragment=fragment, context=context)
    response.headers["Vary"] = "HX-Request, HX-Target"
    return response


@router.get("/lab/frontier", include_in_schema=False)
@router.get("/api/lab/frontier", summary="Candidate policies: savings against false-pass rate, and the recommended one")
def lab_frontier(request: Request, session: SessionDep, filters: SetDep, measure: Measure = "tokens") -> Any:
    """The policy frontier of a set of runs (the lab page loads it after the rest)."""
    filters, _ = view.default_filters(session, filters)
    data = {"frontier": view.frontier_of(session, filters=filters, measure=measure),
            "set": {"filters": dict(view.set_key(filters))}}
    return respond(request, "lab_frontier.html", data, fragment="_lab_frontier.html",
                   context={"set_query": _query(data), "measure": measure})
