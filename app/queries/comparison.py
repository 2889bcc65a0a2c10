"""Read queries of the compare and pair views.

A comparison costs two queries (one per group, early-stop reason joined in), whatever
the number of pairs: no per-run query.
"""

from __future__ import annotations

from typing import Any, Optional

import orjson
from sqlalchemy import Boolean, and_, case, exists, func, literal, select
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.expression import ColumnElement
from sqlmodel import Session

from .. import compare, diskcache, notfound
from ..compare import Group
from ..compare_flags import deciding_call
from ..errors import BoardError
from ..models import CRITERIA, CRITICS, EARLY, RUNS, STEPS
from ..models import RUN_TAGS as TAGS
from ..notfound import missing_groups
from ..secrets import is_secret_key
from . import run_list
from .cache import data_cached, data_version
from .live import named


class _CostIncomplete(ColumnElement[bool]):
    """Whether a run's cost is a lower bound: the first of `keys` its meta holds is false
    (coder_eval's `cost_complete`), as SQL either store runs. Written out per dialect:
    `rows_of` sends SQLite's statement to the driver as compiled, so a JSON path bound as a
    parameter would reach it unprocessed (the keys are this module's own words)."""

    inherit_cache = True
    type = Boolean()

    def __init__(self, meta: Any, keys: tuple[str, ...]):
        self.meta = meta
        self.keys = keys


@compiles(_CostIncomplete, "sqlite")
def _cost_incomplete_sqlite(element: _CostIncomplete, compiler: Any, **kw: Any) -> str:
    # json_type says 'false' for a JSON false only (NULL for a missing key or no meta); it
    # raises on text that is not JSON, which the board never writes but another tool might
    meta = compiler.process(element.meta, **kw)
    first = ", ".join(f"json_type({meta}, '$.{key}')" for key in element.keys)
    return f"(CASE WHEN json_valid({meta}) THEN coalesce({first}, NULL) END = 'false')"


@compiles(_CostIncomplete)
def _cost_incomplete_default(element: _CostIncomplete, compiler: Any, **kw: Any) -> str:
    meta = compiler.process(element.meta, **kw)
    first = ", ".join(f"CAST({meta} AS jsonb) -> '{key}'" for key in element.keys)
    return f"(coalesce({first}, NULL) = 'false'::jsonb)"


def cost_floor() -> Any:
    """The column `cost_floor`: true (1 on SQLite) when the run's cost is a lower bound."""
    return _CostIncomplete(RUNS.c.meta, ("cost_complete",)).label("cost_floor")


def agent_cost_floor() -> Any:
    """The column `agent_cost_floor`: true when the agent's own cost is a lower bound. A run
    read from a task.json without its run.json row knows when only the bill's other parts
    (a dialog's simulator) went unpriced (`agent_cost_complete`); else it is the run's flag."""
    return _CostIncomplete(RUNS.c.meta, ("agent_cost_complete", "cost_complete")).label("agent_cost_floor")


COLUMNS = [RUNS.c.id, RUNS.c.run_id, RUNS.c.task_id, RUNS.c.replicate, RUNS.c.experiment, RUNS.c.variant,
           RUNS.c.verdict, RUNS.c.state, RUNS.c.stop_reason, RUNS.c.early_stopped, RUNS.c.steps,
           RUNS.c.tokens_total, RUNS.c.elapsed_s, RUNS.c.cost_usd, RUNS.c.agent_cost_usd, RUNS.c.started_at, RUNS.c.tool_calls,
           RUNS.c.agent_elapsed_s, RUNS.c.status, RUNS.c.source_status, RUNS.c.tags, RUNS.c.early_stop_enabled,
           # the producer could not price all of it: the cost is a lower bound
           cost_floor(), agent_cost_floor(),
           # a verdict that measured something (an execute night's crash carries no score)
           case((run_list.MEASURED, 1), else_=0).label("measured")]


def _condition(group: Group) -> Any:
    if group.kind == "variant":
        return and_(RUNS.c.experiment == group.experiment, RUNS.c.variant == group.value)
    if group.kind == "experiment":
        return RUNS.c.experiment == group.value
    return exists().where(and_(TAGS.c.run_pk == RUNS.c.id, TAGS.c.tag == group.value))


def superseded() -> Any:
    """The ids of runs of an experiment that a later run of the same variant, task and
    replicate replaces: compare's pairing (`compare.index_runs`: the latest by start
    time, then by store order) as one SQL statement, so the overview counts the runs the
    comparison pairs (two results folders of one experiment are not replicates)."""
    key = func.coalesce(func.nullif(RUNS.c.task_id, ""), RUNS.c.run_id)
    order = func.row_number().over(
        partition_by=(RUNS.c.experiment, RUNS.c.variant, key, func.coalesce(RUNS.c.replicate, 0)),
        order_by=(case((RUNS.c.started_at.is_(None), 1), else_=0), RUNS.c.started_at.desc(), RUNS.c.id.desc()))
    ranked = select(RUNS.c.id, order.label("recency")).where(RUNS.c.experiment.is_not(None)).subquery()
    return select(ranked.c.id).where(ranked.c.recency > 1)


#: How many set-aside run ids the overview names in its statements; past that it uses the
#: window query itself in each (correct, but it is evaluated once per statement).
SUPERSEDED_IDS_MAX = 5000


def superseded_ids(session: Session) -> Any:
    """The runs `superseded` names, as cheaply as the store allows: None when no task and
    replicate of an experiment's variant has two runs (one grouping, the usual case), else
    their ids, or the statement itself past SUPERSEDED_IDS_MAX (the window query took ~0.3 s
    per statement at 100,000 runs, and the overview has six)."""
    task = func.nullif(RUNS.c.task_id, "")  # a run without a task is keyed by its own id: never twice
    twice = session.execute(
        select(literal(1)).where(RUNS.c.experiment.is_not(None), task.is_not(None))
        .group_by(RUNS.c.experiment, RUNS.c.variant, task, func.coalesce(RUNS.c.replicate, 0))
        .having(func.count() > 1).limit(1)).first()
    if twice is None:
        return None
    ids = session.execute(superseded().limit(SUPERSEDED_IDS_MAX + 1)).scalars().all()
    return list(ids) if len(ids) <= SUPERSEDED_IDS_MAX else superseded()


def rows_of(session: Session, stmt: Any) -> list[dict[str, Any]]:
    """A query's rows as dicts. On SQLite straight from the driver: SQLAlchemy's per-row
    result processing was two thirds of a 10,000-pair comparison (docs/performance.md).
    JSON columns then arrive as text: read them with `jsontext.column_value`. Times arrive as text
    too, in an order-preserving form (the only thing a comparison does with them)."""
    conn = session.connection()
    if conn.dialect.name != "sqlite":
        return [dict(r) for r in session.execute(stmt).mappings()]
    compiled = stmt.compile(dialect=conn.dialect, compile_kwargs={"render_postcompile": True})
    params = tuple(compiled.params[k] for k in compiled.positiontup or ())
    cursor = conn.exec_driver_sql(str(compiled), params)
    names = [d[0] for d in cursor.cursor.description]
    return [dict(zip(names, r)) for r in cursor.fetchall()]


def group_runs(session: Session, *, group: Group) -> list[dict[str, Any]]:
    """Every run of one group, with its early-stop record's reason, step and deciding
    criterion. JSON columns (tags, armed_criteria) are as `rows_of` gives them
    (`jsontext.column_value`)."""
    cols = [*COLUMNS, EARLY.c.reason.label("early_stop_reason"), EARLY.c.step.label("early_stop_step"),
            EARLY.c.deciding_criterion, EARLY.c.armed_criteria, EARLY.c.tool_call_index]
    stmt = (select(*cols).select_from(RUNS.outerjoin(EARLY, EARLY.c.run_pk == RUNS.c.id))
            .where(_condition(group)).order_by(RUNS.c.id))
    return rows_of(session, stmt)


def group_criteria(session: Session, *, group: Group, early_only: bool = False,
                   failed_only: bool = False) -> dict[int, list[dict[str, Any]]]:
    """The criteria of every run of a group, by run key: only the early-stopped runs', or
    only the criteria that failed, when asked (the flags need no more)."""
    cond = [_condition(group)]
    if early_only:
        cond.append(exists().where(EARLY.c.run_pk == RUNS.c.id))
    if failed_only:
        cond.append(CRITERIA.c.has_result.is_(True))
        cond.append((CRITERIA.c.passed.is_(False))
                    | (CRITERIA.c.passed.is_(None) & (CRITERIA.c.score < CRITERIA.c.pass_threshold)))
    stmt = (select(CRITERIA.c.run_pk, CRITERIA.c.criterion_id, CRITERIA.c.type, CRITERIA.c.gating,
                   CRITERIA.c.stop_when, CRITERIA.c.has_spec, CRITERIA.c.has_result, CRITERIA.c.score,
                   CRITERIA.c.passed, CRITERIA.c.pass_threshold)
            .select_from(CRITERIA.join(RUNS, RUNS.c.id == CRITERIA.c.run_pk))
            .where(*cond).order_by(CRITERIA.c.run_pk, CRITERIA.c.position, CRITERIA.c.id))
    out: dict[int, list[dict[str, Any]]] = {}
    for r in rows_of(session, stmt):
        out.setdefault(r["run_pk"], []).append(r)
    return out


def group_evidence(session: Session, *, group: Group) -> dict[int, dict[str, Any]]:
    """For each early-stopped run of a group: the critics that objected (retry or stop) on
    the step where it was cut, and the call that decided the stop. Two queries for the
    whole group; only the deciding steps' records are read."""
    cond = _condition(group)
    out: dict[int, dict[str, Any]] = {}
    steps = (select(EARLY.c.run_pk, EARLY.c.tool_call_index, STEPS.c.record)
             .select_from(EARLY.join(RUNS, RUNS.c.id == EARLY.c.run_pk)
                          .join(STEPS, and_(STEPS.c.run_pk == EARLY.c.run_pk, STEPS.c.step == EARLY.c.step)))
             .where(cond))
    for r in rows_of(session, steps):
        pk, tci, record = r["run_pk"], r["tool_call_index"], r["record"]
        try:
            parsed = orjson.loads(record) if record else None
        except orjson.JSONDecodeError:
            parsed = None
        out[pk] = {"critics": [], "call": deciding_call(parsed, tci)}
    critics = (select(CRITICS.c.run_pk, CRITICS.c.critic, CRITICS.c.effective_action, CRITICS.c.reason)
               .select_from(CRITICS.join(EARLY, and_(EARLY.c.run_pk == CRITICS.c.run_pk, EARLY.c.step == CRITICS.c.step))
                            .join(RUNS, RUNS.c.id == CRITICS.c.run_pk))
               .where(cond, CRITICS.c.effective_action.in_(("retry", "stop")))
               .order_by(CRITICS.c.run_pk, CRITICS.c.idx))
    for r in rows_of(session, critics):
        out.setdefault(r["run_pk"], {"critics": [], "call": None})["critics"].append(
            {"critic": r["critic"], "action": r["effective_action"], "reason": r["reason"]})
    return out


def metadata_keys(session: Session, *, group: Group, limit: int = 50) -> list[str]:
    """Metadata keys the runs of a group carry (for the group-by menu), from a sample; not
    the secret-sounding ones (app.compare.check_group_by refuses them)."""
    keys: dict[str, None] = {}
    for (meta,) in session.execute(select(RUNS.c.meta).where(_condition(group)).limit(200)):
        if isinstance(meta, dict):
            for k, v in meta.items():
                if isinstance(k, str) and isinstance(v, (str, int, float, bool)) and len(keys) < limit \
                        and not is_secret_key(k):
                    keys.setdefault(k, None)
    return sorted(keys)


def group_exists(session: Session, *, group: Group) -> bool:
    """Whether any run belongs to the group (a comparison of an empty group answers nothing)."""
    return session.execute(select(RUNS.c.id).where(_condition(group)).limit(1)).first() is not None


def variants_by_experiment(session: Session, *, limit: int = 500) -> dict[str, list[str]]:
    """Each experiment's variants, for the chooser and the default comparison."""
    rows = session.execute(select(RUNS.c.experiment, RUNS.c.variant).where(
        RUNS.c.experiment.is_not(None), RUNS.c.variant.is_not(None)).distinct()
        .order_by(RUNS.c.experiment, RUNS.c.variant).limit(limit)).all()
    out: dict[str, list[str]] = {}
    for experiment, variant in rows:
        out.setdefault(experiment, []).append(variant)
    return out


def choices(session: Session) -> dict[str, list[str]]:
    """Experiments and tags the chooser offers."""
    experiments = list(session.execute(select(RUNS.c.experiment).where(RUNS.c.experiment.is_not(None))
                                       .distinct().order_by(RUNS.c.experiment).limit(500)).scalars())
    tags = list(session.execute(select(TAGS.c.tag).distinct().order_by(TAGS.c.tag).limit(500)).scalars())
    return {"experiments": experiments, "tags": tags}


def find_partner(session: Session, *, run: dict[str, Any]) -> Optional[str]:
    """The run of the same experiment, task and replicate in another variant (the e2e twin of a smoke run)."""
    if not run.get("experiment"):
        return None
    stmt = (select(RUNS.c.run_id, RUNS.c.variant).where(
        RUNS.c.experiment == run["experiment"], RUNS.c.task_id == run["task_id"],
        RUNS.c.replicate == run["replicate"], RUNS.c.run_id != run["run_id"],
        func.coalesce(RUNS.c.variant, "") != (run.get("variant") or ""))
        .order_by(RUNS.c.variant, RUNS.c.started_at.desc(), RUNS.c.id.desc()))
    rows = session.execute(stmt).all()
    if not rows:
        return None
    # Prefer e2e for a smoke run (the usual question), then any other variant.
    for run_id, variant in rows:
        if variant == "e2e":
            return run_id
    return rows[0][0]


def comparison(session, ga: Group, gb: Group, *, group: Optional[str] = None, sort: str = "task", only: str = "",
               offset: int = 0, limit: Optional[int] = None) -> dict[str, Any]:
    """Everything `/compare` (and `qita compare`) shows for groups a and b: pairs with their
    flags, summary, statistics, replicates, and the pairs grouped by `group`. The table's
    rows are `pairs[offset:offset + limit]` after the sort and filter (`pairs_total`).

    The pairing and every figure are kept until a run changes (app.queries.cache), and
    app.warm computes the usual comparisons ahead of the first visitor: a view, another
    sort or another page then costs no query but the data version's."""

    engine, version = session.get_bind(), data_version(session)
    computed: dict[str, Any] = {}

    def both() -> tuple[dict[str, Any], dict[str, Any]]:
        if "both" not in computed:
            computed["both"] = _comparison(session, ga, gb)
        return computed["both"]

    def kept(key: tuple, compute: Any) -> Any:
        # In memory until a run changes, on disk across restarts (app.diskcache).
        return data_cached(session, key=key, compute=lambda: diskcache.load_or_compute(
            engine, key=key, version=version, compute=compute))

    # What the page shows and what only grouping needs are kept apart: the second is as big
    # as the first and is read back only when a grouping is not kept already.
    public = kept(("comparison", ga, gb), lambda: both()[0])

    def internal() -> dict[str, Any]:
        return kept(("comparison-internal", ga, gb), lambda: both()[1])

    if computed:
        internal()  # computed together: keep it now rather than compute it again later
    grouped = None
    if group:
        grouped = kept(("comparison-groups", ga, gb, group),
                       lambda: _grouped(session, ga, public["pairs"], internal(), group))
    rows = compare.sort_pairs(public["pairs"], sort=sort, disagreements_only=only == "disagree")
    start = max(0, offset)
    shown = rows[start:start + limit] if limit is not None else rows[start:]
    return {**public, "pairs": shown, "pairs_total": len(rows), "pairs_offset": start, "group_by": group,
            "grouped": grouped}


def _comparison(session, ga: Group, gb: Group) -> tuple[dict[str, Any], dict[str, Any]]:
    """(what the page and the API show, what grouping needs besides)."""
    rows_a = group_runs(session, group=ga)
    rows_b = group_runs(session, group=gb)
    criteria_a = group_criteria(session, group=ga, early_only=True)
    result = compare.compare_rows(rows_a, rows_b, criteria_a=criteria_a,
                                  criteria_b=group_criteria(session, group=gb, failed_only=True),
                                  evidence=group_evidence(session, group=ga),
                                  label_a=ga.label, label_b=gb.label)
    summary = result["summary"]
    public = {
        "groups": {"a": ga.to_json(), "b": gb.to_json()},
        "headline": compare.headline(summary, ga.label, gb.label),
        "summary": summary,
        "replicates": result["replicates"],
        "pairs": result["pairs"],
        "unpaired": result["unpaired"],
        "duplicates": result["duplicates"],
        "in_both": result["in_both"],
    }
    # Kept as lists: the disk cache (app.diskcache) writes JSON, whose keys are strings.
    return public, {"rows_a": rows_a, "criteria_a": [[pk, rows] for pk, rows in criteria_a.items()]}


def _grouped(session, ga: Group, pairs: list[dict[str, Any]], internal: dict[str, Any], group: str) -> list[dict[str, Any]]:
    rows_a = {r["run_id"]: r for r in internal["rows_a"]}
    criteria_a = {pk: rows for pk, rows in internal["criteria_a"]}
    if group.startswith("meta:"):
        # Metadata is read only for this: a copy of the rows with it, the cached ones untouched.
        meta = {r["run_id"]: r["meta"] for r in rows_of(session, select(RUNS.c.run_id, RUNS.c.meta)
                                                         .where(_condition(ga)))}
        rows_a = {rid: {**row, "meta": meta.get(rid)} for rid, row in rows_a.items()}
    return compare.group_pairs(pairs, group, rows_a, criteria_a)


def resolve_groups(session: Session, *, experiment: Optional[str], a: Optional[str], b: Optional[str],
                   a_experiment: Optional[str], b_experiment: Optional[str], a_tag: Optional[str],
                   b_tag: Optional[str]) -> Optional[tuple[compare.Group, compare.Group]]:
    """The two groups the query names (or the default pick), None when there is nothing to compare.

    A group naming an experiment, variant or tag the board does not hold is a 404 that
    names the valid ones; the same group twice is a 400 (a comparison needs two). A name
    masked as pages show it (a link's) stands for the one name that masks to it.
    """
    experiment, a_experiment, b_experiment = (named(session, RUNS.c.experiment, v)
                                              for v in (experiment, a_experiment, b_experiment))
    a, b = (named(session, RUNS.c.variant, v) for v in (a, b))
    a_tag, b_tag = (named(session, TAGS.c.tag, v) for v in (a_tag, b_tag))
    if a_experiment or b_experiment:
        if not (a_experiment and b_experiment):
            raise BoardError("to compare two experiments give both a_experiment and b_experiment",
                             details={"valid": notfound.experiments(session)})
        groups = compare.Group("experiment", a_experiment), compare.Group("experiment", b_experiment)
        _check_groups(session, groups)
        return groups
    if a_tag or b_tag:
        if not (a_tag and b_tag):
            raise BoardError("to compare two tags give both a_tag and b_tag", details={"valid": notfound.tags(session)})
        groups = compare.Group("tag", a_tag), compare.Group("tag", b_tag)
        _check_groups(session, groups)
        return groups
    variants = variants_by_experiment(session)
    if experiment and not group_exists(session, group=compare.Group("experiment", experiment)):
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
            raise BoardError("to compare two variants give experiment, a and b (e.g. ?experiment=E&a=smoke&b=e2e)",
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
            raise BoardError(f"experiment {experiment!r} has fewer than two variants "
                             f"({', '.join(variants[experiment]) or 'none'}): choose two groups", status=404,
                             details={"variants": variants, "experiments": notfound.experiments(session)})
        return None
    e, va, vb = pick
    return compare.Group("variant", va, e), compare.Group("variant", vb, e)


def _check_groups(session, groups: tuple[compare.Group, compare.Group]) -> None:
    """404 naming the valid choices when a group holds no run; 400 when both are the same."""
    ga, gb = groups
    asked = {"a": ga.to_json(), "b": gb.to_json()}
    missing = [g.value for g in groups if not group_exists(session, group=g)]
    if missing:
        raise missing_groups(session, kind=ga.kind, asked=asked, missing=list(dict.fromkeys(missing)),
                             experiment=ga.experiment)
    if ga == gb:
        raise BoardError(f"both sides are {ga.description}: choose two different {ga.kind}s to compare",
                         details={"asked": asked})
