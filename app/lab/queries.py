"""Read queries of the policy lab: a few bulk queries per
set of runs, whatever its size, never one per run.

A set is given as WHERE conditions on `runs` (the runs list's filters,
`app.queries.run_list.run_conditions`). Only finished runs whose lab state is up to date take
part; the others are counted as pending (`app.lab.index`).
"""

from __future__ import annotations

from typing import Any

import orjson
from sqlalchemy import and_, case, exists, func, select
from sqlmodel import Session

from ..jsontext import column_value
from ..models import EARLY, LAB_DECISIONS, LAB_RUNS, RUNS, STEPS
from ..queries.comparison import COLUMNS, rows_of
from .sim import Crit, SimRun, sim_crit
from .state import unpack_series

#: the run columns a simulation reads besides compare's
EXTRA = [RUNS.c.source_format, RUNS.c.budget_max_tokens, RUNS.c.experiment, RUNS.c.variant]


def _fresh() -> Any:
    return and_(RUNS.c.state == "finished", LAB_RUNS.c.run_updated_at == RUNS.c.updated_at)


def _early() -> Any:
    return exists().where(EARLY.c.run_pk == RUNS.c.id)


def set_counts(session: Session, *, where: list[Any]) -> dict[str, int]:
    """{runs, finished, early_stopped, unfinished}: how the set splits before indexing."""
    finished = RUNS.c.state == "finished"
    row = session.execute(select(
        func.count(),
        func.coalesce(func.sum(case((finished, 1), else_=0)), 0),
        func.coalesce(func.sum(case((and_(finished, _early()), 1), else_=0)), 0),
    ).select_from(RUNS).where(*where)).one()
    return {"runs": int(row[0]), "finished": int(row[1]), "early_stopped": int(row[2]),
            "unfinished": int(row[0]) - int(row[1])}


def load_runs(session: Session, *, where: list[Any], include_early: bool = False) -> list[SimRun]:
    """The indexed runs of a set, ready to simulate: their figures, cumulative series and
    live criteria. Runs already cut by an early stop are left out unless asked for (a
    simulation needs the whole run). Two queries."""
    cond = [*where, _fresh()]
    if not include_early:
        cond.append(~_early())
    cols = [*COLUMNS, *EXTRA, LAB_RUNS.c.first_step, LAB_RUNS.c.step_count, LAB_RUNS.c.series,
            LAB_RUNS.c.gate_threshold]
    rows = rows_of(session, select(*cols).select_from(RUNS.join(LAB_RUNS, LAB_RUNS.c.run_pk == RUNS.c.id))
                   .where(*cond).order_by(RUNS.c.id))
    runs: dict[int, SimRun] = {}
    for r in rows:
        first, count = r.pop("first_step"), int(r.pop("step_count") or 0)
        runs[r["id"]] = SimRun(row=r, step_count=count, first_step=first if first is not None else 0,
                               series=unpack_series(r.pop("series"), count), gate_threshold=r.pop("gate_threshold"))
    if not runs:
        return []
    stmt = (select(LAB_DECISIONS.c.run_pk, LAB_DECISIONS.c.criterion_id, LAB_DECISIONS.c.type,
                   LAB_DECISIONS.c.polarities, LAB_DECISIONS.c.verdict, LAB_DECISIONS.c.step,
                   LAB_DECISIONS.c.tool_call_index, LAB_DECISIONS.c.pass_from_step, LAB_DECISIONS.c.declared,
                   LAB_DECISIONS.c.decide_within, LAB_DECISIONS.c.weight)
            .select_from(LAB_DECISIONS.join(RUNS, RUNS.c.id == LAB_DECISIONS.c.run_pk)
                         .join(LAB_RUNS, LAB_RUNS.c.run_pk == RUNS.c.id))
            .where(*cond, LAB_DECISIONS.c.polarities != ""))
    for d in rows_of(session, stmt):
        run = runs.get(d["run_pk"])
        if run is not None:
            run.crits[d["criterion_id"]] = _crit(d, run.first_step)
    return list(runs.values())


def _crit(d: dict[str, Any], first_step: int) -> Crit:
    return sim_crit(id=d["criterion_id"], type=d["type"], polarities=tuple(p for p in d["polarities"].split(",") if p),
                    verdict=d["verdict"], step=d["step"], tool_call_index=d["tool_call_index"],
                    pass_from_step=d["pass_from_step"], declared=d["declared"], decide_within=d["decide_within"],
                    first_step=first_step, weight=d["weight"])


def criteria_catalogue(session: Session, *, where: list[Any]) -> list[dict[str, Any]]:
    """Every criterion id of the set's indexed full runs: type, what it can decide live (the
    union over the runs; or why it cannot be evaluated live), in how many runs, how often
    decided pass / fail, and the arming the runs declare. One grouped query."""
    stmt = (select(LAB_DECISIONS.c.criterion_id, LAB_DECISIONS.c.type, LAB_DECISIONS.c.polarities,
                   LAB_DECISIONS.c.declared, LAB_DECISIONS.c.verdict, LAB_DECISIONS.c.gating,
                   func.min(LAB_DECISIONS.c.reason).label("reason"), func.count().label("runs"))
            .select_from(LAB_DECISIONS.join(RUNS, RUNS.c.id == LAB_DECISIONS.c.run_pk)
                         .join(LAB_RUNS, LAB_RUNS.c.run_pk == RUNS.c.id))
            .where(*where, _fresh(), ~_early())
            .group_by(LAB_DECISIONS.c.criterion_id, LAB_DECISIONS.c.type, LAB_DECISIONS.c.polarities,
                      LAB_DECISIONS.c.declared, LAB_DECISIONS.c.verdict, LAB_DECISIONS.c.gating))
    out: dict[str, dict[str, Any]] = {}
    for r in rows_of(session, stmt):
        c = out.setdefault(r["criterion_id"], {"id": r["criterion_id"], "types": set(), "polarities": set(),
                                               "runs": 0, "live_runs": 0, "reason": None, "declared": {},
                                               "decided": {"pass": 0, "fail": 0}, "gating": False})
        if r["type"]:
            c["types"].add(r["type"])
        c["runs"] += r["runs"]
        c["gating"] = c["gating"] or bool(r["gating"])  # informational only when no run lets it gate
        pols = [p for p in (r["polarities"] or "").split(",") if p]
        if pols:
            c["live_runs"] += r["runs"]
            c["polarities"].update(pols)
        elif c["reason"] is None:
            c["reason"] = r["reason"]
        if r["declared"]:
            c["declared"][r["declared"]] = c["declared"].get(r["declared"], 0) + r["runs"]
        if r["verdict"] in ("pass", "fail"):
            c["decided"][r["verdict"]] += r["runs"]
    result = []
    for c in out.values():
        result.append({**c, "types": sorted(c["types"]), "type": ", ".join(sorted(c["types"])) or None,
                       "polarities": sorted(c["polarities"]), "live": bool(c["polarities"])})
    result.sort(key=lambda c: (not c["live"], c["id"]))
    return result


def calibration_rows(session: Session) -> tuple[list[dict[str, Any]], dict[tuple[str, str], int]]:
    """Across every indexed full run of the store that passed or failed: per criterion type,
    id, live decision and run verdict, how many; and in how many experiments each
    (type, id) was decided. Two grouped queries. A run that errored (a crash, a failed
    build) is left out: it says nothing of whether an early decision was right about the
    task, and counting it made a skill engaged before a crash a false pass."""
    base = (LAB_DECISIONS.join(RUNS, RUNS.c.id == LAB_DECISIONS.c.run_pk)
            .join(LAB_RUNS, LAB_RUNS.c.run_pk == RUNS.c.id))
    cond = [_fresh(), ~_early(), LAB_DECISIONS.c.verdict.in_(("pass", "fail")),
            RUNS.c.verdict.in_(("pass", "fail"))]
    rows = rows_of(session, select(LAB_DECISIONS.c.type, LAB_DECISIONS.c.criterion_id,
                                   LAB_DECISIONS.c.verdict.label("decision"), RUNS.c.verdict.label("run_verdict"),
                                   func.count().label("n"))
                   .select_from(base).where(*cond)
                   .group_by(LAB_DECISIONS.c.type, LAB_DECISIONS.c.criterion_id, LAB_DECISIONS.c.verdict,
                             RUNS.c.verdict))
    experiments = {(r["type"] or "(no type)", r["criterion_id"]): int(r["n"]) for r in rows_of(
        session, select(LAB_DECISIONS.c.type, LAB_DECISIONS.c.criterion_id,
                        func.count(func.distinct(RUNS.c.experiment)).label("n"))
        .select_from(base).where(*cond).group_by(LAB_DECISIONS.c.type, LAB_DECISIONS.c.criterion_id))}
    return rows, experiments


def partners(session: Session, *, experiment: str, variant: str) -> list[dict[str, Any]]:
    """The experiment's other variants' runs that stopped early or ran with early stop on
    (the recorded smoke runs), with their early-stop record, step count and signatures."""
    cols = [*COLUMNS, *EXTRA, EARLY.c.step.label("early_stop_step"), EARLY.c.reason.label("early_stop_reason"),
            EARLY.c.deciding_criterion, EARLY.c.armed_criteria, LAB_RUNS.c.first_step, LAB_RUNS.c.step_count,
            LAB_RUNS.c.signatures, LAB_RUNS.c.gate_threshold]
    stmt = (select(*cols).select_from(RUNS.join(LAB_RUNS, LAB_RUNS.c.run_pk == RUNS.c.id)
                                      .outerjoin(EARLY, EARLY.c.run_pk == RUNS.c.id))
            .where(RUNS.c.experiment == experiment, RUNS.c.variant != variant, RUNS.c.early_stop_enabled.is_(True),
                   _fresh()).order_by(RUNS.c.id))
    return rows_of(session, stmt)


def declared_armings(session: Session, *, run_pks: list[int]) -> dict[int, dict[str, Crit]]:
    """The armed criteria of the given runs (what their spec declares), as the simulation reads them."""
    if not run_pks:
        return {}
    out: dict[int, dict[str, Crit]] = {}
    stmt = (select(LAB_DECISIONS.c.run_pk, LAB_DECISIONS.c.criterion_id, LAB_DECISIONS.c.declared,
                   LAB_DECISIONS.c.decide_within)
            .where(LAB_DECISIONS.c.run_pk.in_(run_pks), LAB_DECISIONS.c.declared.is_not(None)))
    for d in rows_of(session, stmt):
        out.setdefault(d["run_pk"], {})[d["criterion_id"]] = Crit(id=d["criterion_id"], declared=d["declared"],
                                                                  decide_within=d["decide_within"])
    return out


def signatures(session: Session, *, run_pks: list[int]) -> dict[int, list[str]]:
    """Each run's per-step digests of its tool calls."""
    if not run_pks:
        return {}
    stmt = select(LAB_RUNS.c.run_pk, LAB_RUNS.c.signatures).where(LAB_RUNS.c.run_pk.in_(run_pks))
    return {r["run_pk"]: column_value(r["signatures"]) or [] for r in rows_of(session, stmt)}


def step_calls_at(session: Session, *, pairs: list[tuple[int, int]]) -> dict[tuple[int, int], Any]:
    """The parsed step records of a few (run pk, step) pairs (the steps where two runs part)."""
    if not pairs:
        return {}
    from sqlalchemy import tuple_

    stmt = select(STEPS.c.run_pk, STEPS.c.step, STEPS.c.record).where(tuple_(STEPS.c.run_pk, STEPS.c.step).in_(pairs))
    out: dict[tuple[int, int], Any] = {}
    for r in rows_of(session, stmt):
        try:
            out[(r["run_pk"], r["step"])] = orjson.loads(r["record"]) if r["record"] else {}
        except orjson.JSONDecodeError:
            out[(r["run_pk"], r["step"])] = {}
    return out


def experiments_with_variants(session: Session) -> dict[str, list[str]]:
    """Each experiment's variants (the lab's chooser), from compare's query."""
    from ..queries.comparison import variants_by_experiment

    return variants_by_experiment(session)


def early_stop_variants(session: Session, *, experiment: str) -> list[str]:
    """The variants of an experiment that ran with early stop on."""
    stmt = (select(RUNS.c.variant).where(RUNS.c.experiment == experiment, RUNS.c.early_stop_enabled.is_(True),
                                         RUNS.c.variant.is_not(None)).distinct().order_by(RUNS.c.variant))
    return [v for (v,) in session.execute(stmt)]

