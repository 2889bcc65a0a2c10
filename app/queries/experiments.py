"""Read queries of the experiments overview.

A handful of grouped queries over the runs table whatever the number of runs, plus
two per comparison headline (one per variant, as the compare page does); the whole
overview is cached until the data changes (app.queries.cache.store_cached).
"""

from __future__ import annotations

from typing import Any, Optional

from sqlalchemy import and_, case, func, select, true
from sqlmodel import Session

from .. import compare, failures, overview
from ..models import RUNS
from ..urls import masked_query
from . import comparison, run_list
from .cache import store_cached

#: Experiments (the most recently active) whose default comparison gets its headline computed.
HEADLINES = 25
#: Failure reasons listed per variant.
REASONS = 3


def _count(cond: Any) -> Any:
    return func.sum(case((cond, 1), else_=0))


def experiments_overview(session: Session) -> dict[str, Any]:
    """Every experiment with its variants' figures and its default comparison's headline."""
    return store_cached(session, key=("overview",), compute=lambda: _overview(session))


def _overview(session: Session) -> dict[str, Any]:
    activity = func.max(func.coalesce(RUNS.c.ended_at, RUNS.c.started_at))
    # The runs compare pairs: of one task and replicate, the latest (an experiment run
    # twice is two attempts at the same pairs, not replicates); the others are counted apart.
    older = comparison.superseded_ids(session)
    kept = true() if older is None else RUNS.c.id.not_in(older)
    set_aside = {} if older is None else {(e, v): int(n) for e, v, n in session.execute(
        select(RUNS.c.experiment, RUNS.c.variant, func.count()).where(RUNS.c.id.in_(older))
        .group_by(RUNS.c.experiment, RUNS.c.variant))}
    rows = session.execute(
        select(RUNS.c.experiment, RUNS.c.variant, func.count(),
               _count(RUNS.c.verdict == "pass"), _count(RUNS.c.verdict == "fail"), _count(RUNS.c.verdict == "error"),
               _count(RUNS.c.verdict == "not_graded"), _count(RUNS.c.verdict.is_(None)),
               _count(RUNS.c.state == "running"), _count(RUNS.c.early_stopped.is_(True)), activity,
               _count(and_(RUNS.c.verdict.in_(("pass", "fail", "error")), run_list.MEASURED)),
               func.min(RUNS.c.source_format), func.max(RUNS.c.source_format))
        .where(kept).group_by(RUNS.c.experiment, RUNS.c.variant)).all()
    costs: dict[tuple, list[float]] = {}
    floors: dict[tuple, int] = {}
    for e, v, c, floor in session.execute(select(RUNS.c.experiment, RUNS.c.variant, RUNS.c.cost_usd,
                                                 comparison.cost_floor()).where(RUNS.c.cost_usd.is_not(None), kept)):
        costs.setdefault((e, v), []).append(float(c))
        if floor:
            floors[(e, v)] = floors.get((e, v), 0) + 1
    by_task: dict[tuple, list[tuple[int, int, int]]] = {}
    decided_runs = _count(RUNS.c.verdict.in_(("pass", "fail", "error")))
    for e, v, d, p, x in session.execute(select(RUNS.c.experiment, RUNS.c.variant, decided_runs,
                                                _count(RUNS.c.verdict == "pass"), _count(RUNS.c.verdict == "error"))
                                         .where(kept).group_by(RUNS.c.experiment, RUNS.c.variant, RUNS.c.task_id)):
        by_task.setdefault((e, v), []).append((int(d or 0), int(p or 0), int(x or 0)))
    failing: dict[tuple, list[dict[str, Any]]] = {}
    for run in failures.failing_run_reasons(session, conds=[kept]):
        failing.setdefault((run["experiment"], run["variant"]), []).append(run)

    experiments: dict[Optional[str], dict[str, Any]] = {}
    for e, v, n, passed, failed, errored, not_graded, pending, running, early, latest, measured, lo, hi in rows:
        counts = {"variant": v, "runs": int(n), "passed": int(passed or 0), "failed": int(failed or 0),
                  "measured": int(measured or 0),
                  "errored": int(errored or 0), "not_graded": int(not_graded or 0), "no_verdict": int(pending or 0),
                  "running": int(running or 0), "early_stopped": int(early or 0), "latest": latest}
        figures = overview.variant_figures(counts, costs.get((e, v), []))
        # costs that are lower bounds (coder_eval's cost_complete false): so is a median over them
        figures["cost_lower_bounds"] = floors.get((e, v), 0)
        figures["set_aside"] = set_aside.get((e, v), 0)
        # whose clock `latest` is on: a producer that writes times with no zone (coder_eval's
        # local clock) is shown as written, not as UTC (app.present.ZONELESS_SOURCES)
        figures["latest_source"] = lo if lo == hi else None
        figures.update(overview.task_figures(by_task.get((e, v), []), measured=figures["pass_rate"] is not None))
        figures["failing"] = len(failing.get((e, v), []))
        figures["failure_reasons"] = failures.top_reasons(failing.get((e, v), []), limit=REASONS)
        figures["runs_url"] = "/runs?" + masked_query({"experiment": run_list.filter_value(e),
                                                       "variant": run_list.filter_value(v)})
        exp = experiments.setdefault(e, {"experiment": e, "runs": 0, "set_aside": 0, "running": 0, "latest": None,
                                         "latest_source": figures["latest_source"], "variants": []})
        if exp["latest_source"] != figures["latest_source"]:
            exp["latest_source"] = None
        exp["variants"].append(figures)
        exp["runs"] += figures["runs"]
        exp["set_aside"] += figures["set_aside"]
        exp["running"] += figures["running"]
        if latest is not None and (exp["latest"] is None or latest > exp["latest"]):
            exp["latest"] = latest
    ordered = overview.sort_experiments(list(experiments.values()))
    for i, exp in enumerate(ordered):
        exp["variants"].sort(key=lambda f: (f["variant"] is None, f["variant"] or ""))
        names = [f["variant"] for f in exp["variants"] if f["variant"] is not None]
        exp["variant_names"] = names
        exp["runs_url"] = "/runs?" + masked_query({"experiment": run_list.filter_value(exp["experiment"])})
        exp["compare"] = None
        if exp["experiment"] is not None and len(names) >= 2:
            exp["compare"] = _default_comparison(session, exp["experiment"], names, headline=i < HEADLINES)
    return {"experiments": ordered, "runs": sum(e["runs"] + e["set_aside"] for e in ordered)}


def _default_comparison(session: Session, experiment: str, names: list[str], *, headline: bool) -> dict[str, Any]:
    pick = compare.choose_default({experiment: names})
    assert pick is not None  # two variants or more
    _e, a, b = pick
    out: dict[str, Any] = {"a": a, "b": b, "url": "/compare?" + masked_query({"experiment": experiment, "a": a, "b": b}),
                           "headline": None, "paired": None}
    if headline:
        ga, gb = compare.Group("variant", a, experiment), compare.Group("variant", b, experiment)
        result = compare.compare_rows(comparison.group_runs(session, group=ga),
                                      comparison.group_runs(session, group=gb))
        out["headline"] = compare.headline(result["summary"], ga.label, gb.label)
        out["paired"] = result["summary"]["paired"]
        out["agreement"] = result["summary"]["verdict_agreement"]
    return out
