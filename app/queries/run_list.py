"""The runs list: its search and filters, one page of runs, the figures of the filtered set
and the filter menus."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from sqlalchemy import and_, case, exists, func, or_, select
from sqlmodel import Session

from .. import search
from ..failures import failing_run_reasons, top_reasons
from ..models import RUN_TAGS as TAGS
from ..models import RUNS
from ..overview import pass_rate
from ..secrets import cut_text
from .cache import data_version, store_cached
from .live import named

SORTS = {
    "started": RUNS.c.started_at,
    "steps": RUNS.c.steps,
    "tokens": RUNS.c.tokens_total,
    "duration": RUNS.c.elapsed_s,
    "run_id": RUNS.c.run_id,
}
#: Characters of a run's objective a list row carries (the run's own page has all of it):
#: a page of 50 runs with 1 MB objectives read and masked 100 MB before.
LIST_TEXT_CHARS = 2000
LIST_COLUMNS = [
    RUNS.c.run_id, RUNS.c.task_id, RUNS.c.experiment, RUNS.c.variant, RUNS.c.replicate,
    func.substr(RUNS.c.objective, 1, LIST_TEXT_CHARS + 1).label("objective"),
    func.length(RUNS.c.objective).label("objective_chars"),
    RUNS.c.agent, RUNS.c.model, RUNS.c.started_at, RUNS.c.started_ts, RUNS.c.state, RUNS.c.status,
    RUNS.c.stop_reason, RUNS.c.stop_reason_raw, RUNS.c.verdict, RUNS.c.gated_on, RUNS.c.early_stopped,
    RUNS.c.steps, RUNS.c.retries, RUNS.c.tokens_total, RUNS.c.cost_usd, RUNS.c.elapsed_s, RUNS.c.tags,
    RUNS.c.source_format, RUNS.c.budget_max_steps, RUNS.c.budget_max_tokens, RUNS.c.budget_max_runtime_s,
]


#: The value of an `experiment` or `variant` filter that picks the runs without one
#: (`?experiment=(none)`), as `verdict=none` picks the runs without a verdict.
NONE_VALUE = "(none)"


def filter_value(value: Optional[str]) -> str:
    """A run's experiment or variant as the filter that picks it (None: NONE_VALUE)."""
    return NONE_VALUE if value is None else value


@dataclass
class RunFilters:
    """The runs-list query: search, filters, sort and page, all carried in the URL."""

    q: Optional[str] = None
    experiment: Optional[str] = None
    variant: Optional[str] = None
    state: Optional[str] = None
    stop_reason: Optional[str] = None
    verdict: Optional[str] = None
    early_stopped: Optional[bool] = None
    model: Optional[str] = None
    tag: Optional[str] = None
    task_id: Optional[str] = None
    sort: str = "started"
    order: str = "desc"
    offset: int = 0
    limit: int = 50
    extra: dict[str, Any] = field(default_factory=dict)

    def as_params(self, **changes: Any) -> dict[str, Any]:
        """The non-default parameters, as a query string dict (for links that keep the view)."""
        data = {k: getattr(self, k) for k in ("q", "experiment", "variant", "state", "stop_reason", "verdict",
                                              "early_stopped", "model", "tag", "task_id", "sort", "order", "offset", "limit")}
        data.update(changes)
        defaults = {"sort": "started", "order": "desc", "offset": 0, "limit": 50}
        out = {}
        for k, v in data.items():
            if v is None or v == "" or defaults.get(k, object()) == v:
                continue
            out[k] = ("true" if v else "false") if isinstance(v, bool) else v
        return out


# -- search -------------------------------------------------------------------------------
# `q` is a case-insensitive substring of one of a run's searchable texts, masked as pages
# show them (app.search: run fields, critic reasons, tool names, error texts). On SQLite
# an FTS5 trigram index gives candidate texts and the same ILIKE re-checks them; shorter
# q, databases without the index and PostgreSQL use the ILIKE alone.
#: Rows a page may be expected to walk along the sort index, checking each with ILIKE
#: (about 3 µs a row at 100,000 runs), before the search index is the cheaper way to a
#: page. The estimate assumes matches spread evenly; when they cluster at the far end the
#: walk costs what every search cost before the index (a full ILIKE scan), no more.
_WALK_ROWS = 2_000


def _search(session: Optional[Session], q: str, use_index: bool = True) -> Any:
    return search.condition(session, q, use_index=use_index)


def _where(f: RunFilters, session: Optional[Session] = None, use_index: bool = True) -> list[Any]:
    conds: list[Any] = []
    if f.q:
        conds.append(_search(session, f.q, use_index))
    for name in ("experiment", "variant", "state", "model", "task_id"):
        value = getattr(f, name)
        if value == NONE_VALUE and name in ("experiment", "variant"):
            conds.append(getattr(RUNS.c, name).is_(None))
        elif value:
            column = getattr(RUNS.c, name)
            conds.append(column == named(session, column, value))
    if f.stop_reason:
        conds.append(RUNS.c.stop_reason == f.stop_reason)
    if f.verdict:
        if f.verdict == "none":
            conds.append(RUNS.c.verdict.is_(None))
        else:
            conds.append(RUNS.c.verdict == f.verdict)
    if f.early_stopped is not None:
        conds.append(RUNS.c.early_stopped.is_(bool(f.early_stopped)))
    if f.tag:
        conds.append(exists().where(and_(TAGS.c.run_pk == RUNS.c.id, TAGS.c.tag == named(session, TAGS.c.tag, f.tag))))
    return conds


def run_conditions(session: Session, *, filters: RunFilters) -> list[Any]:
    """The WHERE conditions of the runs list's search and filters (the policy lab
    simulates over the same sets)."""
    return _where(filters, session)


def _filter_key(f: RunFilters) -> tuple:
    return (f.q, f.experiment, f.variant, f.state, f.stop_reason, f.verdict, f.early_stopped, f.model, f.tag, f.task_id)


def list_runs(session: Session, *, filters: RunFilters) -> tuple[list[dict[str, Any]], int]:
    """One page of runs matching `filters`, and how many match in all."""
    conds = _where(filters, session)
    col = SORTS.get(filters.sort, RUNS.c.started_at)
    desc = filters.order == "desc"

    def counts() -> tuple[int, int]:
        total, non_null = session.execute(select(func.count(), func.count(col)).select_from(RUNS).where(*conds)).one()
        return int(total), int(non_null)

    count, non_null = store_cached(session, key=("list_count", filters.sort, _filter_key(filters)), compute=counts)
    offset = max(0, filters.offset)
    limit = max(1, min(filters.limit, 500))
    if filters.q and count:
        # A common q (thousands of matches) fills a page within a short walk of the sort
        # index with the ILIKE alone; going through the search index would fetch and sort
        # every match instead. A rare q is the other way round.
        walk = (offset + limit) * data_version(session)[1] / count
        if walk <= _WALK_ROWS:
            conds = _where(filters, session, use_index=False)
    # Runs without a sort value come last in both orders. Reading the two parts apart,
    # and only ids first, lets each part walk the sort column's index (a deep page is
    # then an index walk, not a sort of the whole set), the same on SQLite and PostgreSQL.
    tie = RUNS.c.id.desc() if desc else RUNS.c.id.asc()
    ids: list[int] = []
    if offset < non_null:
        ids += session.execute(
            select(RUNS.c.id).where(*conds, col.is_not(None))
            .order_by(col.desc() if desc else col.asc(), tie).offset(offset).limit(limit)).scalars()
    if len(ids) < limit and count > non_null:
        ids += session.execute(
            select(RUNS.c.id).where(*conds, col.is_(None)).order_by(tie)
            .offset(max(0, offset - non_null)).limit(limit - len(ids))).scalars()
    if not ids:
        return [], count
    found = {r["id"]: r for r in session.execute(select(RUNS.c.id, *LIST_COLUMNS).where(RUNS.c.id.in_(ids))).mappings()}
    rows = []
    for pk in ids:
        if pk in found:
            row = dict(found[pk])
            row.pop("id")
            if row["objective"] is not None:
                row["objective"] = cut_text(row["objective"], LIST_TEXT_CHARS, row["objective_chars"])
            rows.append(row)
    return rows, count


def _median(session: Session, col, conds: list[Any]) -> Optional[float]:
    n = session.execute(select(func.count(col)).where(*conds, col.is_not(None))).scalar_one()
    if not n:
        return None
    base = select(col).where(*conds, col.is_not(None)).order_by(col)
    if n % 2:
        return float(session.execute(base.offset(n // 2).limit(1)).scalar_one())
    pair = [float(v) for v in session.execute(base.offset(n // 2 - 1).limit(2)).scalars()]
    return sum(pair) / 2


def run_stats(session: Session, *, filters: RunFilters) -> dict[str, Any]:
    """Figures for the filtered set: counts, pass rate over graded runs, medians, top failures."""
    return store_cached(session, key=("run_stats", _filter_key(filters)), compute=lambda: _run_stats(session, filters))


#: Variants whose pass rates the list's figures show one by one.
BY_VARIANT_SHOWN = 8


#: A graded run whose verdict was measured, as coder_eval's `tasks_measured` counts rows
#: (`weighted_score` not null): for coder_eval results their score; for other traces a pass
#: or fail verdict, or an errored run that was graded all the same (criteria or a score).
MEASURED = or_(
    and_(RUNS.c.source_format == "coder_eval", RUNS.c.score.is_not(None)),
    and_(RUNS.c.source_format != "coder_eval",
         or_(RUNS.c.verdict.in_(("pass", "fail")), RUNS.c.score.is_not(None), RUNS.c.criteria_verdict.is_not(None))),
)


def _run_stats(session: Session, filters: RunFilters) -> dict[str, Any]:
    conds = _where(filters, session)
    row = session.execute(select(
        func.count(),
        func.sum(case((RUNS.c.verdict == "pass", 1), else_=0)),
        func.sum(case((RUNS.c.verdict == "fail", 1), else_=0)),
        func.sum(case((RUNS.c.verdict == "error", 1), else_=0)),
        func.sum(case((RUNS.c.early_stopped.is_(True), 1), else_=0)),
        func.sum(case((RUNS.c.state == "running", 1), else_=0)),
        func.sum(case((and_(RUNS.c.verdict.in_(("pass", "fail", "error")), MEASURED), 1), else_=0)),
        func.sum(case((RUNS.c.verdict == "not_graded", 1), else_=0)),
    ).select_from(RUNS).where(*conds)).first()
    total, passed, failed, errored, early, running, measured, not_graded = (int(v or 0) for v in row)
    # An errored run never produced a gradeable attempt: it counts as a miss (coder_eval's
    # pass rate keeps errors in the denominator); not graded runs are in neither side.
    graded = passed + failed + errored
    reasons = session.execute(
        select(RUNS.c.stop_reason, func.count()).where(*conds).group_by(RUNS.c.stop_reason)
        .order_by(func.count().desc(), *_text_order(session, RUNS.c.stop_reason)).limit(20)
    ).all()
    failing = failing_run_reasons(session, conds=conds)
    # A pass rate over runs of different variants mixes two measurements: the page shows
    # one per variant when the filtered runs span several.
    groups = session.execute(
        select(RUNS.c.experiment, RUNS.c.variant, func.count(),
               func.sum(case((RUNS.c.verdict == "pass", 1), else_=0)),
               func.sum(case((RUNS.c.verdict.in_(("fail", "error")), 1), else_=0)),
               func.sum(case((and_(RUNS.c.verdict.in_(("pass", "fail", "error")), MEASURED), 1), else_=0)),
               func.sum(case((RUNS.c.verdict == "not_graded", 1), else_=0)))
        .where(*conds).group_by(RUNS.c.experiment, RUNS.c.variant)
        .order_by(func.count().desc(), *_text_order(session, RUNS.c.experiment), *_text_order(session, RUNS.c.variant))
        .limit(BY_VARIANT_SHOWN + 1)).all()
    by_variant = [{"experiment": e, "variant": v, "experiment_filter": filter_value(e), "variant_filter": filter_value(v),
                   "runs": int(n), "passed": int(p or 0), "decided": int(p or 0) + int(f or 0),
                   "pass_rate": pass_rate(int(p or 0), int(f or 0), measured=int(m or 0), not_graded=int(g or 0))}
                  for e, v, n, p, f, m, g in groups]
    return {
        "runs": total,
        "passed": passed,
        "failed": failed,
        "errored": errored,
        "graded": graded,
        "measured": measured,
        "not_graded": not_graded,
        "pass_rate": pass_rate(passed, failed, errored, measured, not_graded),
        "early_stopped": early,
        "running": running,
        "stop_reasons": [{"stop_reason": r, "count": c} for r, c in reasons],
        "median_steps": _median(session, RUNS.c.steps, conds),
        "median_tokens": _median(session, RUNS.c.tokens_total, conds),
        "median_elapsed_s": _median(session, RUNS.c.elapsed_s, conds),
        "failing": len(failing),
        "by_variant": by_variant[:BY_VARIANT_SHOWN],
        "variants_more": len(by_variant) > BY_VARIANT_SHOWN,
        "top_failures": top_reasons(failing),
    }


def _text_order(session: Session, expr) -> tuple:
    """Ties broken by the text itself, nulls last, in code-point order on every backend.

    Without it equal counts come back in whatever order the backend groups them, so a
    cut-off list (top 5) differs between SQLite and PostgreSQL; "C" makes PostgreSQL
    compare like SQLite's BINARY whatever the server's locale.
    """
    if session.get_bind().dialect.name == "postgresql":
        expr = expr.collate("C")
    return (expr.is_(None), expr.asc())


def facet_values(session: Session) -> dict[str, list[str]]:
    """Distinct values for the filter menus."""
    return store_cached(session, key=("facets",), compute=lambda: _facet_values(session))


def _facet_values(session: Session) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for name in ("experiment", "variant", "model", "stop_reason"):
        col = getattr(RUNS.c, name)
        out[name] = [v for v in session.execute(select(col).where(col.is_not(None)).distinct().order_by(col).limit(200)).scalars()]
    out["tag"] = list(session.execute(select(TAGS.c.tag).distinct().order_by(TAGS.c.tag).limit(200)).scalars())
    return out

