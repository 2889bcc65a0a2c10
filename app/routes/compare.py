"""Compare two groups of runs (`/compare`, JSON `/api/compare`) and two runs side by side (`/pair`, `/api/pair`)."""

from __future__ import annotations

from typing import Annotated, Any, Literal, Optional

from fastapi import APIRouter, Query, Request
from fastapi.responses import PlainTextResponse, Response

from .. import compare, compare_export, compare_flags
from ..deps import SessionDep, run_row
from ..errors import BoardError
from ..export import disposition
from ..queries import comparison, run_detail
from ..queries.live import find_run
from ..render import past_end, respond
from ..run_view import run_header
from ..secrets import Masker
from ..urls import masked_query
from ..words import plural

router = APIRouter(tags=["compare"])

PAIR_STEPS = 200
#: Rows of the per-pair table a page shows at a time (the figures always count every pair).
PAGE_PAIRS = 200
Text = Annotated[Optional[str], Query(max_length=400)]





def chooser_defaults(choices: dict[str, list[str]], groups: Any) -> dict[str, Optional[str]]:
    """What the chooser's two-experiment and two-tag forms start at: the groups shown when
    they are of that kind, else the first two choices (both sides the same option made the
    unchanged form a 400)."""
    out: dict[str, Optional[str]] = {}
    for kind, names in (("experiment", choices.get("experiments") or []), ("tag", choices.get("tags") or [])):
        shown = groups if groups is not None and groups[0].kind == kind else None
        out[f"a_{kind}"] = shown[0].value if shown else (names[0] if names else None)
        out[f"b_{kind}"] = shown[1].value if shown else (names[1] if len(names) > 1 else None)
    return out

@router.get("/compare", include_in_schema=False)
@router.get("/api/compare", summary="Compare two groups of runs, paired by (task_id, replicate)")
def compare_view(request: Request, session: SessionDep, experiment: Text = None, a: Text = None, b: Text = None,
                 a_experiment: Text = None, b_experiment: Text = None, a_tag: Text = None, b_tag: Text = None,
                 sort: Literal["task", "savings", "disagreement"] = "task",
                 only: Optional[Literal["disagree", ""]] = None,
                 group: Annotated[Optional[str], Query(max_length=300, description=(
                     "split the pairs by tag, deciding_criterion, criterion_type, stop_reason or meta:KEY"))] = None,
                 offset: Annotated[int, Query(ge=0, le=10_000_000)] = 0,
                 limit: Annotated[Optional[int], Query(ge=1, le=100_000, description=(
                     "rows of the per-pair table; the page shows 200 at a time, the API all"))] = None,
                 format: Annotated[Optional[Literal["json", "md", "csv", ""]], Query(
                     description="json (the default under /api), md (Markdown for a pull request) or csv (the pairs)")] = None) -> Any:
    """Summary figures with their intervals, headline, flags, groups and per-task pairs of group a against group b."""
    group = compare.check_group_by(group)
    groups = comparison.resolve_groups(session, experiment=experiment, a=a, b=b, a_experiment=a_experiment,
                            b_experiment=b_experiment, a_tag=a_tag, b_tag=b_tag)
    choices = comparison.choices(session)
    context: dict[str, Any] = {"choices": choices, "sort": sort, "only": only or "", "limit_param": limit,
                               "variants": comparison.variants_by_experiment(session),
                               "chooser_defaults": chooser_defaults(choices, groups)}
    if groups is None:
        if format in ("md", "csv"):
            raise BoardError("nothing to compare: no experiment has two variants; choose two groups", status=404)
        data: dict[str, Any] = {"groups": None, "summary": None, "pairs": [], "headline": None}
        return respond(request, "compare.html", data, context=context)
    ga, gb = groups
    warmer = getattr(request.app.state, "warmer", None)
    if warmer is not None:
        warmer.asked(ga, gb, group)
    page = not request.url.path.startswith("/api/") and format not in ("json", "md", "csv")
    data = comparison.comparison(session, ga, gb, group=group, sort=sort, only=only or "", offset=offset,
                                      limit=limit or (PAGE_PAIRS if page else None))
    moved = past_end(request, offset=offset, total=data["pairs_total"], limit=limit or (PAGE_PAIRS if page else None),
                     what=plural(data["pairs_total"], "pair") + (" disagree" if only == "disagree" else ""))
    if moved is not None:
        return moved
    params = ({"experiment": ga.experiment, "a": ga.value, "b": gb.value} if ga.kind == "variant" else
              {f"a_{ga.kind}": ga.value, f"b_{gb.kind}": gb.value})
    if format in ("md", "csv"):
        return _export(request, data, ga, gb, format, params)
    context.update(ga=ga, gb=gb, bars=compare.bars(data["summary"]), bar_chart=compare.BAR_CHART, params=params,
                   unmeasured=compare.unmeasured_labels(data["summary"], ga.label, gb.label),
                   group=group, limit=limit or PAGE_PAIRS,
                   meta_keys=comparison.metadata_keys(session, group=ga),
                   export_query=masked_query({k: v for k, v in {**params, "group": group}.items() if v}))
    return respond(request, "compare.html", data, fragment="_compare_table.html", context=context)


def _export(request: Request, data: dict[str, Any], ga: compare.Group, gb: compare.Group, fmt: str,
            params: dict[str, Any]) -> Response:
    from ..security import reveal_state

    if not reveal_state(request).shown:
        masker = Masker()
        data, ga, gb, params = masker.data(data), masker.data(ga), masker.data(gb), masker.data(params)
    if fmt == "csv":
        name = "-".join(["compare", *(str(v) for v in params.values() if v)])
        return PlainTextResponse(compare_export.csv_text(data), media_type="text/csv; charset=utf-8",
                                 headers={"Content-Disposition": disposition(name, "csv", fallback="compare")})
    text = compare_export.markdown(data, base_url=str(request.base_url), label_a=ga.label, label_b=gb.label,
                                   description=f"{ga.description} against {gb.description}")
    return PlainTextResponse(text, media_type="text/markdown; charset=utf-8")


def _side(session, run_id: str) -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]], int]:
    data = run_header(session, row=run_row(session, run_id))
    pk = data.pop("_pk")
    data.pop("_updated_at")
    data.pop("lane", None)
    data.pop("run_events", None)
    steps, total = run_detail.get_steps(session, run_pk=pk, offset=0, limit=PAIR_STEPS)
    return data, steps, [compare.compact_step(s) for s in steps], total


def pair_story(side_a: dict[str, Any], side_b: dict[str, Any], steps_a: list[dict[str, Any]]) -> dict[str, Any]:
    """Why a stopped where it did: the deciding step with the criterion that decided it,
    the call that decided it, and the flags on the pair (none when a ran to its end)."""
    early = side_a.get("early_stop")
    if not early or early.get("step") is None:
        return {"deciding": None, "flags": []}
    step = next((s for s in steps_a if s["step"] == early["step"]), None)
    record = step.get("record") if step else None
    call = compare_flags.deciding_call(record, early.get("tool_call_index")) if record is not None else None
    critics = [{"critic": c.get("name") or c.get("critic"), "action": c.get("effective_action"), "reason": c.get("reason")}
               for c in (step or {}).get("critic_outputs") or []]
    deciding = early.get("deciding_criterion")
    criterion = next((c for c in side_a.get("criteria") or [] if c["id"] == deciding), None)
    run_a, run_b = side_a["run"], side_b["run"]
    flags = compare_flags.early_stop_flags(
        evidence={"critics": critics, "call": call}, criteria_a=compare_flags.rows_from_view(side_a.get("criteria") or []),
        criteria_b=compare_flags.rows_from_view(side_b.get("criteria") or []),
        early_stop_enabled=bool(run_a.get("early_stop_enabled")), armed_ids=early.get("armed_criteria") or [],
        verdict_a=run_a.get("verdict"), label_a=run_a.get("variant") or "run a", label_b=run_b.get("variant") or "run b",
        deciding=deciding)
    return {"deciding": {"step": early["step"], "criterion": deciding, "reason": early.get("reason"),
                         "details": criterion.get("details") if criterion else None,
                         "live_verdict": criterion.get("live_verdict") if criterion else None, "call": call},
            "flags": flags}


@router.get("/pair", include_in_schema=False)
@router.get("/api/pair", summary="Two runs side by side, steps aligned by index, with critics inline and the deciding step")
def pair_view(request: Request, session: SessionDep, a: Annotated[str, Query(min_length=1, max_length=200)],
              b: Annotated[Optional[str], Query(max_length=200)] = None) -> Any:
    """Run a against run b (b defaults to a's twin in another variant of the same experiment)."""
    if b is not None and b != b.strip() and find_run(session, run_id=b) is None:
        # pasted with the spaces around it (a copied cell): the 404 named the trimmed id as nearest
        b = b.strip()
    if not b:
        b = comparison.find_partner(session, run=run_row(session, a))
        if b is None:
            raise BoardError("this run has no twin in another variant of its experiment: give b=RUN_ID", status=404,
                             details={"pair_with": a})
    if b == a:
        raise BoardError("that is the same run twice: give b another run's id", status=400, details={"pair_with": a})
    side_a, full_a, steps_a, total_a = _side(session, a)
    side_b, _full_b, steps_b, total_b = _side(session, b)
    early = side_a.get("early_stop")
    stop_a = early.get("step") if early and early.get("step") is not None else (
        max(s["step"] for s in steps_a) if steps_a else None)
    story = pair_story(side_a, side_b, full_a)
    data = {
        "a": side_a,
        "b": side_b,
        "steps": compare.align_steps(steps_a, steps_b, stop_a=stop_a),
        "steps_total": {"a": total_a, "b": total_b},
        "steps_shown": PAIR_STEPS,
        "stop_a": stop_a,
        "deciding": story["deciding"],
        "flags": story["flags"],
    }
    return respond(request, "pair.html", data)
