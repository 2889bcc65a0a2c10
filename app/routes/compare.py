"""Compare two groups of runs (`/compare`, JSON `/api/compare`) and two runs side by side (`/pair`, `/api/pair`)."""

from __future__ import annotations

from typing import Annotated, Any, Literal, Optional

from fastapi import APIRouter, Query, Request

from .. import compare, compare_queries, notfound, queries
from ..deps import SessionDep
from ..errors import QitaError
from ..notfound import missing_groups, missing_run
from ..render import respond
from .runs import load_run

router = APIRouter(tags=["compare"])

PAIR_STEPS = 200
Text = Annotated[Optional[str], Query(max_length=400)]


def resolve_groups(session, *, experiment: Optional[str], a: Optional[str], b: Optional[str],
                   a_experiment: Optional[str], b_experiment: Optional[str], a_tag: Optional[str],
                   b_tag: Optional[str]) -> Optional[tuple[compare.Group, compare.Group]]:
    """The two groups the query names (or the default pick), None when there is nothing to compare.

    A group naming an experiment, variant or tag the board does not hold is a 404 that
    names the valid ones; the same group twice is a 400 (a comparison needs two).
    """
    if a_experiment or b_experiment:
        if not (a_experiment and b_experiment):
            raise QitaError("to compare two experiments give both a_experiment and b_experiment",
                            details={"valid": notfound.experiments(session)})
        groups = compare.Group("experiment", a_experiment), compare.Group("experiment", b_experiment)
        _check_groups(session, groups)
        return groups
    if a_tag or b_tag:
        if not (a_tag and b_tag):
            raise QitaError("to compare two tags give both a_tag and b_tag", details={"valid": notfound.tags(session)})
        groups = compare.Group("tag", a_tag), compare.Group("tag", b_tag)
        _check_groups(session, groups)
        return groups
    variants = compare_queries.variants_by_experiment(session)
    if experiment and not compare_queries.group_exists(session, group=compare.Group("experiment", experiment)):
        raise missing_groups(session, kind="experiment", asked={"experiment": experiment}, missing=[experiment])
    if a or b:
        if experiment and not (a and b):
            # One side named: the other is the experiment's other variant, when that is unambiguous.
            others = [v for v in variants.get(experiment, []) if v != (a or b)]
            preferred = "e2e" if a else "smoke"
            other = others[0] if len(others) == 1 else preferred if preferred in others else None
            if other is not None:
                a, b = (a, other) if a else (other, b)
        if not (experiment and a and b):
            raise QitaError("to compare two variants give experiment, a and b (e.g. ?experiment=E&a=smoke&b=e2e)",
                            details={"variants": {experiment: notfound.variants(session, experiment=experiment)}
                                     if experiment else {}, "experiments": notfound.experiments(session)})
        groups = compare.Group("variant", a, experiment), compare.Group("variant", b, experiment)
        _check_groups(session, groups)
        return groups
    if experiment:
        variants = {experiment: variants.get(experiment, [])}
    pick = compare.choose_default(variants)
    if pick is None:
        if experiment:
            raise QitaError(f"experiment {experiment!r} has fewer than two variants "
                            f"({', '.join(variants[experiment]) or 'none'}): choose two groups", status=404,
                            details={"variants": variants, "experiments": notfound.experiments(session)})
        return None
    e, va, vb = pick
    return compare.Group("variant", va, e), compare.Group("variant", vb, e)


def _check_groups(session, groups: tuple[compare.Group, compare.Group]) -> None:
    """404 naming the valid choices when a group holds no run; 400 when both are the same."""
    ga, gb = groups
    asked = {"a": ga.to_json(), "b": gb.to_json()}
    missing = [g.value for g in groups if not compare_queries.group_exists(session, group=g)]
    if missing:
        raise missing_groups(session, kind=ga.kind, asked=asked, missing=list(dict.fromkeys(missing)),
                             experiment=ga.experiment)
    if ga == gb:
        raise QitaError(f"both sides are {ga.description}: choose two different {ga.kind}s to compare",
                        details={"asked": asked})


@router.get("/compare", include_in_schema=False)
@router.get("/api/compare", summary="Compare two groups of runs, paired by (task_id, replicate)")
def compare_view(request: Request, session: SessionDep, experiment: Text = None, a: Text = None, b: Text = None,
                 a_experiment: Text = None, b_experiment: Text = None, a_tag: Text = None, b_tag: Text = None,
                 sort: Literal["task", "savings", "disagreement"] = "task",
                 only: Optional[Literal["disagree", ""]] = None) -> Any:
    """Summary figures, headline and per-task pairs of group a against group b."""
    groups = resolve_groups(session, experiment=experiment, a=a, b=b, a_experiment=a_experiment,
                            b_experiment=b_experiment, a_tag=a_tag, b_tag=b_tag)
    context: dict[str, Any] = {"choices": compare_queries.choices(session), "sort": sort, "only": only or "",
                               "variants": compare_queries.variants_by_experiment(session)}
    if groups is None:
        data: dict[str, Any] = {"groups": None, "summary": None, "pairs": [], "headline": None}
        return respond(request, "compare.html", data, context=context)
    ga, gb = groups
    result = compare.compare_rows(compare_queries.group_runs(session, group=ga),
                                  compare_queries.group_runs(session, group=gb))
    data = {
        "groups": {"a": ga.to_json(), "b": gb.to_json()},
        "headline": compare.headline(result["summary"], ga.label, gb.label),
        "summary": result["summary"],
        "pairs": compare.sort_pairs(result["pairs"], sort=sort, disagreements_only=only == "disagree"),
        "unpaired": result["unpaired"],
        "duplicates": result["duplicates"],
    }
    context.update(ga=ga, gb=gb, bars=compare.bars(result["summary"]),
                   params={"experiment": ga.experiment, "a": ga.value, "b": gb.value} if ga.kind == "variant" else
                   {f"a_{ga.kind}": ga.value, f"b_{gb.kind}": gb.value})
    return respond(request, "compare.html", data, fragment="_compare_table.html", context=context)


def _side(session, run_id: str) -> tuple[dict[str, Any], list[dict[str, Any]], int]:
    data = load_run(session, run_id)
    pk = data.pop("_pk")
    data.pop("_updated_at")
    data.pop("lane", None)
    data.pop("run_events", None)
    steps, total = queries.get_steps(session, run_pk=pk, offset=0, limit=PAIR_STEPS)
    return data, [compare.compact_step(s) for s in steps], total


@router.get("/pair", include_in_schema=False)
@router.get("/api/pair", summary="Two runs side by side, steps aligned by index")
def pair_view(request: Request, session: SessionDep, a: Annotated[str, Query(min_length=1, max_length=200)],
              b: Annotated[Optional[str], Query(max_length=200)] = None) -> Any:
    """Run a against run b (b defaults to a's twin in another variant of the same experiment)."""
    if not b:
        row = queries.get_run_row(session, run_id=a)
        if row is None:
            raise missing_run(session, a)
        b = compare_queries.find_partner(session, run=row)
        if b is None:
            raise QitaError("this run has no twin in another variant of its experiment: give b=RUN_ID", status=404)
    side_a, steps_a, total_a = _side(session, a)
    side_b, steps_b, total_b = _side(session, b)
    early = side_a.get("early_stop")
    stop_a = early.get("step") if early and early.get("step") is not None else (
        max(s["step"] for s in steps_a) if steps_a else None)
    data = {
        "a": side_a,
        "b": side_b,
        "steps": compare.align_steps(steps_a, steps_b, stop_a=stop_a),
        "steps_total": {"a": total_a, "b": total_b},
        "steps_shown": PAIR_STEPS,
        "stop_a": stop_a,
    }
    return respond(request, "pair.html", data)
