"""Read queries, as keyword-only functions: the only place pages and the API get data from."""

from __future__ import annotations

import copy
import hashlib
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Optional

import orjson
from sqlalchemy import and_, case, exists, func, select
from sqlmodel import Session

from qita.engine.critic import ACTION_RANK

from . import search
from .present import critic_patches, live_verdict_items
from .secrets import cut_text
from .models import RUNS, STEPS, CRITICS, EVENTS, CRITERIA, EARLY, RUN_TAGS as TAGS


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
        if value:
            conds.append(getattr(RUNS.c, name) == value)
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
        conds.append(exists().where(and_(TAGS.c.run_pk == RUNS.c.id, TAGS.c.tag == f.tag)))
    return conds


def run_conditions(session: Session, *, filters: RunFilters) -> list[Any]:
    """The WHERE conditions of the runs list's search and filters (the policy lab
    simulates over the same sets)."""
    return _where(filters, session)


# -- list-page caching ---------------------------------------------------------------------
# The list page's figures (count, pass rate, medians, top reasons) and the filter menus
# scan the whole filtered set; at 100,000 runs that is far over the page's budget. They
# only change when the runs change, so they are cached per (database, filters, data
# version). The data version is read from the database itself (newest `updated_at`
# through its index, and the row count), so a write by another process sharing the
# same PostgreSQL invalidates the cache as surely as one by this board's writer.
_CACHE: "OrderedDict[tuple, Any]" = OrderedDict()
_CACHE_MAX = 256
_CACHE_LOCK = threading.Lock()


def data_version(session: Session) -> tuple:
    """What moves whenever any run is added or changes (see `_data_version`)."""
    return _data_version(session)


def _data_version(session: Session) -> tuple:
    # Read once per session (one request): the list page asks for three cached values.
    version = session.info.get("qita_data_version")
    if version is None:
        newest = session.execute(select(func.max(RUNS.c.updated_at))).scalar()
        count = session.execute(select(func.count()).select_from(RUNS)).scalar_one()
        version = session.info["qita_data_version"] = (newest, count)
    return version


def _filter_key(f: RunFilters) -> tuple:
    return (f.q, f.experiment, f.variant, f.state, f.stop_reason, f.verdict, f.early_stopped, f.model, f.tag, f.task_id)


def _memo(key: tuple, compute: Any, *, shared: bool = False) -> Any:
    """`compute()` once per key. A copy is returned unless `shared`: the caller then
    promises not to change what it gets (a 10,000-pair comparison is too big to copy)."""
    with _CACHE_LOCK:
        if key in _CACHE:
            _CACHE.move_to_end(key)
            return _CACHE[key] if shared else copy.deepcopy(_CACHE[key])  # callers may change what they get
    value = compute()
    with _CACHE_LOCK:
        _CACHE[key] = value
        while len(_CACHE) > _CACHE_MAX:
            _CACHE.popitem(last=False)
    return value if shared else copy.deepcopy(value)


def _cached(session: Session, key: tuple, compute: Any, *, shared: bool = False) -> Any:
    bind = session.get_bind()
    return _memo((id(bind), str(bind.url), *key, _data_version(session)), compute, shared=shared)


def data_cached(session: Session, *, key: tuple, compute: Any) -> Any:
    """A figure of the whole store kept until any run changes (the data version moves),
    shared with every caller: they must not change it."""
    return _cached(session, key, compute, shared=True)


def store_cached(session: Session, *, key: tuple, compute: Any) -> Any:
    """A figure over the whole store (the experiments overview), kept until the data changes."""
    return _cached(session, key, compute)


def run_cached(session: Session, *, run_pk: int, updated_at: Any, name: str, compute: Any) -> Any:
    """A per-run figure (verdict lane, events without a step) kept until the run changes.

    Every write to a run moves its `updated_at`, so (run, updated_at) names one state of
    it; a long run's page then does not redo whole-run queries on every view.
    """
    bind = session.get_bind()
    return _memo((id(bind), str(bind.url), "run", run_pk, str(updated_at), name), compute)


def list_runs(session: Session, *, filters: RunFilters) -> tuple[list[dict[str, Any]], int]:
    """One page of runs matching `filters`, and how many match in all."""
    conds = _where(filters, session)
    col = SORTS.get(filters.sort, RUNS.c.started_at)
    desc = filters.order == "desc"

    def counts() -> tuple[int, int]:
        total, non_null = session.execute(select(func.count(), func.count(col)).select_from(RUNS).where(*conds)).one()
        return int(total), int(non_null)

    count, non_null = _cached(session, ("list_count", filters.sort, _filter_key(filters)), counts)
    offset = max(0, filters.offset)
    limit = max(1, min(filters.limit, 500))
    if filters.q and count:
        # A common q (thousands of matches) fills a page within a short walk of the sort
        # index with the ILIKE alone; going through the search index would fetch and sort
        # every match instead. A rare q is the other way round.
        walk = (offset + limit) * _data_version(session)[1] / count
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
    return _cached(session, ("run_stats", _filter_key(filters)), lambda: _run_stats(session, filters))


#: Variants whose pass rates the list's figures show one by one.
BY_VARIANT_SHOWN = 8


def _run_stats(session: Session, filters: RunFilters) -> dict[str, Any]:
    from .failures import failing_run_reasons, top_reasons
    from .overview import pass_rate

    conds = _where(filters, session)
    row = session.execute(select(
        func.count(),
        func.sum(case((RUNS.c.verdict == "pass", 1), else_=0)),
        func.sum(case((RUNS.c.verdict == "fail", 1), else_=0)),
        func.sum(case((RUNS.c.verdict == "error", 1), else_=0)),
        func.sum(case((RUNS.c.early_stopped.is_(True), 1), else_=0)),
        func.sum(case((RUNS.c.state == "running", 1), else_=0)),
    ).select_from(RUNS).where(*conds)).first()
    total, passed, failed, errored, early, running = (int(v or 0) for v in row)
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
               func.sum(case((RUNS.c.verdict.in_(("fail", "error")), 1), else_=0)))
        .where(*conds).group_by(RUNS.c.experiment, RUNS.c.variant)
        .order_by(func.count().desc(), *_text_order(session, RUNS.c.experiment), *_text_order(session, RUNS.c.variant))
        .limit(BY_VARIANT_SHOWN + 1)).all()
    by_variant = [{"experiment": e, "variant": v, "runs": int(n), "passed": int(p or 0), "decided": int(p or 0) + int(f or 0),
                   "pass_rate": pass_rate(int(p or 0), int(f or 0))} for e, v, n, p, f in groups]
    return {
        "runs": total,
        "passed": passed,
        "failed": failed,
        "errored": errored,
        "graded": graded,
        "pass_rate": pass_rate(passed, failed, errored),
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
    return _cached(session, ("facets",), lambda: _facet_values(session))


def _facet_values(session: Session) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for name in ("experiment", "variant", "model", "stop_reason"):
        col = getattr(RUNS.c, name)
        out[name] = [v for v in session.execute(select(col).where(col.is_not(None)).distinct().order_by(col).limit(200)).scalars()]
    out["tag"] = list(session.execute(select(TAGS.c.tag).distinct().order_by(TAGS.c.tag).limit(200)).scalars())
    return out


def get_run_row(session: Session, *, run_id: str) -> Optional[dict[str, Any]]:
    """The run's row, or None."""
    row = session.execute(select(RUNS).where(RUNS.c.run_id == run_id)).mappings().first()
    return dict(row) if row else None


def get_criteria(session: Session, *, run_pk: int, early_stop_enabled: bool, early_stopped: bool,
                 armed_ids: Optional[list[str]] = None) -> list[dict[str, Any]]:
    """The run's criteria, with armed / advisory / informational flags and effective pass."""
    from .failures import classify_criteria

    rows = [dict(r) for r in session.execute(
        select(CRITERIA).where(CRITERIA.c.run_pk == run_pk).order_by(CRITERIA.c.position, CRITERIA.c.id)).mappings()]
    return classify_criteria(rows, early_stop_enabled=early_stop_enabled, early_stopped=early_stopped,
                             armed_ids=armed_ids)


def get_early_stop(session: Session, *, run_pk: int) -> Optional[dict[str, Any]]:
    row = session.execute(select(EARLY).where(EARLY.c.run_pk == run_pk)).mappings().first()
    if not row:
        return None
    data = dict(row)
    data.pop("id", None)
    data.pop("run_pk", None)
    return data


def get_lane(session: Session, *, run_pk: int, max_marks: int = 400) -> dict[str, Any]:
    """The verdict lane: one mark per step (or per bucket of steps in a long run).

    Each mark carries the strongest critic action in it (stop > retry > continue), the
    mean critic score, and whether it holds a retried step.
    """
    n = session.execute(select(func.count()).select_from(STEPS).where(STEPS.c.run_pk == run_pk)).scalar_one()
    if n == 0:
        return {"steps": 0, "bucket": 1, "marks": []}
    bucket = max(1, -(-n // max_marks))
    rank = case(*((STEPS.c.critic_action == action, r) for action, r in ACTION_RANK.items()), else_=-1)
    if bucket == 1:
        rows = session.execute(select(STEPS.c.step, STEPS.c.step, rank, STEPS.c.critic_score, STEPS.c.retry.cast(RUNS.c.steps.type))
                               .where(STEPS.c.run_pk == run_pk).order_by(STEPS.c.step)).all()
    else:
        # Buckets by position so a long run keeps a bounded page size. `pos / bucket` would
        # be true division in SQLAlchemy 2 (one bucket per step) and FLOOR is missing from
        # some SQLite builds: the bucket's first position, pos - pos % bucket, is exact.
        pos = func.row_number().over(order_by=STEPS.c.step) - 1
        inner = select(STEPS.c.step.label("step"), (pos - pos % bucket).label("b"), rank.label("rank"),
                       STEPS.c.critic_score.label("score"), STEPS.c.retry.cast(RUNS.c.steps.type).label("retry")) \
            .where(STEPS.c.run_pk == run_pk).subquery()
        rows = session.execute(select(func.min(inner.c.step), func.max(inner.c.step), func.max(inner.c.rank),
                                      func.avg(inner.c.score), func.max(inner.c.retry))
                               .group_by(inner.c.b).order_by(func.min(inner.c.step))).all()
    names = {r: action for action, r in ACTION_RANK.items()}
    marks = [{"step": a, "last": b, "action": names.get(r, None), "score": s, "retry": bool(rt)}
             for a, b, r, s, rt in rows]
    return {"steps": n, "bucket": bucket, "marks": marks}


#: What pages read of a step or event: the preview of a large record (app.previews), else the
#: record. COALESCE stops at the preview, so the large record itself is never read.
_STEP_VIEW = (*[c for c in STEPS.c if c.name not in ("record", "preview")],
              func.coalesce(STEPS.c.preview, STEPS.c.record).label("record"))
_EVENT_RECORD = func.coalesce(EVENTS.c.preview, EVENTS.c.record).label("record")


def get_steps(session: Session, *, run_pk: int, offset: int = 0, limit: int = 25,
              steps: Optional[list[int]] = None) -> tuple[list[dict[str, Any]], int]:
    """A block of steps with their critic outputs and events, and the run's step count.

    `steps` picks the block by step number instead of by offset (a filtered walk, app.walk).
    """
    total = session.execute(select(func.count()).select_from(STEPS).where(STEPS.c.run_pk == run_pk)).scalar_one()
    stmt = select(*_STEP_VIEW).where(STEPS.c.run_pk == run_pk).order_by(STEPS.c.step)
    stmt = stmt.where(STEPS.c.step.in_(steps)) if steps is not None else stmt.offset(max(0, offset))
    rows = [dict(r) for r in session.execute(stmt.limit(max(1, min(limit, 200)))).mappings()]
    if not rows:
        return [], total
    idxs = [r["step"] for r in rows]
    critics: dict[int, list[dict[str, Any]]] = {}
    for c in session.execute(select(CRITICS).where(CRITICS.c.run_pk == run_pk, CRITICS.c.step.in_(idxs))
                             .order_by(CRITICS.c.step, CRITICS.c.idx)).mappings():
        critics.setdefault(c["step"], []).append({
            # QitOS critic outputs carry no name: number them in the order they ran.
            "critic": c["critic"], "name": c["critic"] if c["critic"] else f"critic #{c['idx'] + 1}",
            "action": c["action"], "effective_action": c["effective_action"],
            "reason": c["reason"], "score": c["score"], "details": c["details"]})
    events: dict[int, list[dict[str, Any]]] = {}
    for e in session.execute(select(EVENTS.c.step, EVENTS.c.phase, EVENTS.c.ok, EVENTS.c.ts, _EVENT_RECORD)
                             .where(EVENTS.c.run_pk == run_pk, EVENTS.c.step.in_(idxs))
                             .order_by(EVENTS.c.step, EVENTS.c.ts, EVENTS.c.id)).mappings():
        events.setdefault(e["step"], []).append(dict(e))
    out = []
    for r in rows:
        record = _loads(r["record"])
        # Patches are not columns: they come from the stored record, output by output.
        patches = critic_patches(record)
        outputs = [dict(c, patches=patches[i] if i < len(patches) else None)
                   for i, c in enumerate(critics.get(r["step"], []))]
        step_events = [{"phase": e["phase"], "ok": e["ok"], "ts": e["ts"], "record": _loads(e["record"])}
                       for e in events.get(r["step"], [])]
        out.append({
            "step": r["step"],
            "ts": r["ts"],
            "duration_s": r["duration_s"],
            "tokens": {"input": r["tokens_input"], "output": r["tokens_output"], "total": r["tokens_total"]},
            "cost_usd": r["cost_usd"],
            "retry": r["retry"],
            "critic_action": r["critic_action"],
            "critic_score": r["critic_score"],
            "critic_outputs": outputs,
            "live_verdicts": live_verdict_items(record),
            "events": step_events,
            "extras": step_extras(step_events),
            "record": record,
        })
    return out, total


def get_run_events(session: Session, *, run_pk: int, without_step: bool = True, limit: int = 500) -> list[dict[str, Any]]:
    """Events not tied to a step (run-level phases and unknown record types)."""
    stmt = select(EVENTS.c.step, EVENTS.c.phase, EVENTS.c.ok, EVENTS.c.ts, _EVENT_RECORD).where(EVENTS.c.run_pk == run_pk)
    if without_step:
        stmt = stmt.where(EVENTS.c.step.is_(None))
    rows = session.execute(stmt.order_by(EVENTS.c.ts, EVENTS.c.id).limit(limit)).mappings()
    return [{"step": r["step"], "phase": r["phase"], "ok": r["ok"], "ts": r["ts"], "record": _loads(r["record"])} for r in rows]


def count_run_events(session: Session, *, run_pk: int) -> int:
    """How many run-level events and unknown records the run has (the page shows a bounded number)."""
    return session.execute(select(func.count()).select_from(EVENTS)
                           .where(EVENTS.c.run_pk == run_pk, EVENTS.c.step.is_(None))).scalar_one()


def get_stepless_events(session: Session, *, run_pk: int, limit: int = 500) -> list[dict[str, Any]]:
    """Events naming a step that has no step record (a QitOS folder with events only),
    grouped by step number; each event keeps its index among its step's events."""
    no_step = ~exists().where(STEPS.c.run_pk == run_pk, STEPS.c.step == EVENTS.c.step)
    rows = session.execute(select(EVENTS.c.step, EVENTS.c.phase, EVENTS.c.ok, EVENTS.c.ts, _EVENT_RECORD)
                           .where(EVENTS.c.run_pk == run_pk, EVENTS.c.step.is_not(None), no_step)
                           .order_by(EVENTS.c.step, EVENTS.c.ts, EVENTS.c.id).limit(limit)).mappings()
    groups: dict[int, list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault(r["step"], []).append(
            {"phase": r["phase"], "ok": r["ok"], "ts": r["ts"], "record": _loads(r["record"])})
    return [{"step": k, "events": v} for k, v in groups.items()]


#: Run-level JSON columns a page may show cut and load whole through get_run_field.
RUN_VALUE_COLUMNS = ("critics", "stop_criteria", "meta", "failure_report", "start_record", "end_record")


def get_run_field(session: Session, *, run_pk: int, pointer: str) -> Any:
    """One value of the run outside its steps, addressed by a JSON pointer whose first
    token says where: `/run/<column>/...` (RUN_VALUE_COLUMNS), `/criteria/<id>/details|result/...`
    or `/run_events/<n>/...` (the n-th run-level event or unknown record, in page order).

    Raises KeyError when it is not there, ValueError when the path is malformed.
    """
    tokens = parse_pointer(pointer)
    if len(tokens) < 2:
        raise KeyError("path names no value")
    root, key, rest = tokens[0], tokens[1], tokens[2:]
    if root == "run" and key in RUN_VALUE_COLUMNS:
        value = session.execute(select(RUNS.c[key]).where(RUNS.c.id == run_pk)).scalar_one_or_none()
    elif root == "criteria":
        row = session.execute(select(CRITERIA.c.details, CRITERIA.c.result)
                              .where(CRITERIA.c.run_pk == run_pk, CRITERIA.c.criterion_id == key)).mappings().first()
        if row is None:
            raise KeyError(key)
        value = dict(row)
    elif root == "run_events" and key.isdigit():
        text = session.execute(select(EVENTS.c.record).where(EVENTS.c.run_pk == run_pk, EVENTS.c.step.is_(None))
                               .order_by(EVENTS.c.ts, EVENTS.c.id).offset(int(key)).limit(1)).scalar_one_or_none()
        if text is None:
            raise KeyError(key)
        value = _loads(text)
    else:
        raise KeyError(root)
    return resolve_pointer(value, rest)


def _loads(text: Optional[str]) -> Any:
    if text is None:
        return None
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return text


# -- run view: lazily loaded values, QitOS extras, live stamps ---------------------------

#: Longest JSON pointer accepted for a lazily loaded value, and its deepest nesting.
MAX_POINTER_CHARS = 1000
MAX_POINTER_DEPTH = 32


def parse_pointer(pointer: str) -> list[str]:
    """The tokens of a JSON pointer (RFC 6901) into a stored record; ValueError when malformed.

    It addresses data inside one record, never a file: tokens are only looked up as
    keys or list indexes of the parsed record.
    """
    if not isinstance(pointer, str) or len(pointer) > MAX_POINTER_CHARS:
        raise ValueError("path too long")
    if pointer == "":
        return []
    if not pointer.startswith("/"):
        raise ValueError("path must be a JSON pointer starting with '/'")
    tokens = pointer[1:].split("/")
    if len(tokens) > MAX_POINTER_DEPTH:
        raise ValueError("path too deep")
    out = []
    for tok in tokens:
        if "~" in tok.replace("~0", "").replace("~1", ""):
            raise ValueError("bad escape in path")
        out.append(tok.replace("~1", "/").replace("~0", "~"))
    return out


def make_pointer(*tokens: Any) -> str:
    """A JSON pointer from keys and indexes (inverse of parse_pointer)."""
    return "".join("/" + str(t).replace("~", "~0").replace("/", "~1") for t in tokens)


def resolve_pointer(value: Any, tokens: list[str]) -> Any:
    """The value at `tokens` inside `value`; KeyError when it is not there."""
    for tok in tokens:
        if isinstance(value, dict):
            if tok not in value:
                raise KeyError(tok)
            value = value[tok]
        elif isinstance(value, list):
            if not tok.isdigit() or int(tok) >= len(value):
                raise KeyError(tok)
            value = value[int(tok)]
        else:
            raise KeyError(tok)
    return value


def record_is_large(session: Session, *, run_pk: int, step: int, event: Optional[int] = None) -> bool:
    """Whether a step's (or its `event`-th event's) stored record is a large one (it has a
    preview), found without reading the record: length() would load all of it."""
    if event is None:
        stmt = select(STEPS.c.preview.is_not(None)).where(STEPS.c.run_pk == run_pk, STEPS.c.step == step)
    else:
        stmt = (select(EVENTS.c.preview.is_not(None)).where(EVENTS.c.run_pk == run_pk, EVENTS.c.step == step)
                .order_by(EVENTS.c.ts, EVENTS.c.id).offset(max(0, event)).limit(1))
    return bool(session.execute(stmt).scalar_one_or_none())


def get_step_field(session: Session, *, run_pk: int, step: int, pointer: str, event: Optional[int] = None) -> Any:
    """One value inside a stored step record (or inside the step's `event`-th event record).

    Raises KeyError when the step, event or path does not exist, ValueError when the
    path is malformed.
    """
    tokens = parse_pointer(pointer)
    if event is None:
        text = session.execute(select(STEPS.c.record).where(STEPS.c.run_pk == run_pk, STEPS.c.step == step)).scalar_one_or_none()
    else:
        text = session.execute(select(EVENTS.c.record).where(EVENTS.c.run_pk == run_pk, EVENTS.c.step == step)
                               .order_by(EVENTS.c.ts, EVENTS.c.id).offset(max(0, event)).limit(1)).scalar_one_or_none()
    if text is None:
        raise KeyError("no such step or event")
    return resolve_pointer(_loads(text), tokens)


def step_extras(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What a QitOS-style run keeps only in its events: the model's thought (DECIDE
    `raw_output`) and the memory it observed (OBSERVE `memory`), with where they live so a
    long value can be loaded on demand."""
    out = []
    for i, e in enumerate(events):
        payload = e["record"].get("payload") if isinstance(e.get("record"), dict) else None
        if not isinstance(payload, dict):
            continue
        phase = (e.get("phase") or "").upper()
        if phase == "DECIDE" and payload.get("raw_output") is not None:
            out.append({"label": "thought", "event": i, "path": "/payload/raw_output", "value": payload["raw_output"]})
        elif phase == "OBSERVE" and payload.get("memory") not in (None, {}, []):
            out.append({"label": "memory", "event": i, "path": "/payload/memory", "value": payload["memory"]})
    return out


def run_live_stamp(session: Session, *, run_id: str) -> Optional[dict[str, Any]]:
    """What changes when a run gets new records or changes state (cheap: one row)."""
    row = session.execute(select(RUNS.c.id, RUNS.c.steps, RUNS.c.state, RUNS.c.last_seen_at, RUNS.c.verdict,
                                 RUNS.c.has_end).where(RUNS.c.run_id == run_id)).mappings().first()
    if row is None:
        return None
    stamp = _digest(f"{row['steps']}|{row['state']}|{row['last_seen_at']}|{row['verdict']}|{row['has_end']}")
    return {"pk": row["id"], "state": row["state"], "steps": row["steps"], "stamp": stamp}


def runs_live_stamp(session: Session) -> str:
    """What changes when any run is added, grows, or changes state.

    Every write to a run (ingest recompute, abandon sweep) moves its `updated_at`, so the
    data version the list cache uses (newest `updated_at`, run count: two index reads)
    says it without scanning the table.
    """
    return _digest("|".join(str(v) for v in _data_version(session)))


def _digest(text: str) -> str:
    # A short opaque token: travels in URLs untouched and says nothing about the data.
    return hashlib.sha1(text.encode()).hexdigest()[:16]


def steps_after(session: Session, *, run_pk: int, after: int) -> int:
    """How many steps of the run have an index <= `after` (the offset of the next step)."""
    return session.execute(select(func.count()).select_from(STEPS)
                           .where(STEPS.c.run_pk == run_pk, STEPS.c.step <= after)).scalar_one()


def step_at(session: Session, *, run_pk: int, position: int) -> Optional[int]:
    """The step index at `position` in step order (0 is the first step), or None."""
    if position < 0:
        return None
    return session.execute(select(STEPS.c.step).where(STEPS.c.run_pk == run_pk).order_by(STEPS.c.step)
                           .offset(position).limit(1)).scalar_one_or_none()


def export_records(session: Session, *, run_pk: int, batch: int = 500):
    """The run's records in v1 order for export: run_start, each step followed by its events,
    run-level events, criteria results, early_stop, run_end."""
    run = session.execute(select(RUNS.c.run_id, RUNS.c.start_record, RUNS.c.end_record)
                          .where(RUNS.c.id == run_pk)).mappings().first()
    if run is None:
        return
    if run["start_record"]:
        yield run["start_record"]
    last = -1
    while True:
        rows = session.execute(select(STEPS.c.step, STEPS.c.record).where(STEPS.c.run_pk == run_pk, STEPS.c.step > last)
                               .order_by(STEPS.c.step).limit(batch)).all()
        if not rows:
            break
        idxs = [r[0] for r in rows]
        events: dict[int, list[Any]] = {}
        for st, rec in session.execute(select(EVENTS.c.step, EVENTS.c.record)
                                       .where(EVENTS.c.run_pk == run_pk, EVENTS.c.step.in_(idxs))
                                       .order_by(EVENTS.c.step, EVENTS.c.ts, EVENTS.c.id)):
            events.setdefault(st, []).append(_loads(rec))
        for st, rec in rows:
            yield _loads(rec)
            yield from events.get(st, [])
        last = idxs[-1]
    for rec in session.execute(select(EVENTS.c.record).where(EVENTS.c.run_pk == run_pk, EVENTS.c.step.is_(None))
                               .order_by(EVENTS.c.ts, EVENTS.c.id)).scalars():
        yield _loads(rec)
    for rec in session.execute(select(CRITERIA.c.result).where(CRITERIA.c.run_pk == run_pk, CRITERIA.c.result.is_not(None))
                               .order_by(CRITERIA.c.position, CRITERIA.c.id)).scalars():
        if rec:
            yield rec
    early = session.execute(select(EARLY.c.record).where(EARLY.c.run_pk == run_pk)).scalar_one_or_none()
    if early:
        yield early
    if run["end_record"]:
        yield run["end_record"]


def get_step_events(session: Session, *, run_pk: int, step: int) -> list[dict[str, Any]]:
    """One step's events in order (the same order the field loader's `event` index counts)."""
    rows = session.execute(select(EVENTS.c.phase, EVENTS.c.ok, EVENTS.c.ts, _EVENT_RECORD)
                           .where(EVENTS.c.run_pk == run_pk, EVENTS.c.step == step)
                           .order_by(EVENTS.c.ts, EVENTS.c.id)).mappings()
    return [{"phase": r["phase"], "ok": r["ok"], "ts": r["ts"], "record": _loads(r["record"])} for r in rows]
