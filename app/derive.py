"""The reader's rules from the trace-format contract: verdict, run state and totals.

- Verdict: a recorded `run_end.verdict` wins (`pass`, `fail`, `error` or `not_graded`);
  what the criteria alone say is kept beside it (`criteria_verdict`). Otherwise an early-stopped run passes when
  its armed criteria meet the weighted armed gate (every one passed, unless the run
  records weights and a `gate_threshold`; the others are advisory); any other run passes when every gating criterion passes; a
  run with no graded criteria is `not_graded`. Which criteria are armed and which gate
  is app.criteria's rule. A run that has not finished has no
  verdict (it is never shown as passing).
- Totals: the run_end's figures win over the sums of the steps (tool calls: the steps'
  calls, for producers that do not count them, e.g. QitOS). Tokens count each token
  once (`input` includes the cache buckets); `agent_elapsed_s` and `agent_cost_usd`
  default to `elapsed_s` and `cost_usd` when the run does not tell them apart.
- State: a run with `run_end` is `finished`; without it, `running` while records keep
  arriving, `abandoned` once silent for `abandon_after_s` or when its source is closed.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta
from typing import Any, Optional

from sqlalchemy import Float, and_, bindparam, func, select, update
from sqlalchemy.engine import Connection

from . import search, search_texts
from .criteria import armed_flags, armed_gate_passed, criterion_passed, gating_flags, run_gate_threshold, weight_of
from .ingest.rows import int_of, number_of
from .models import CRITERIA, EARLY, RUNS, STEPS


def derive_verdict(
    criteria: list[dict[str, Any]],
    *,
    early_stopped: bool,
    early_stop_enabled: bool,
    armed_ids: Optional[list[str]] = None,
    gate_threshold: Optional[float] = None,
) -> tuple[str, str]:
    """(verdict, gated_on) from criteria dicts with keys criterion_id, stop_when, gating,
    pass_threshold, has_result, score, passed, has_spec (and optionally weight); which are
    armed, which gate and how the armed gate weighs is app.criteria's rule."""
    if early_stopped:
        flags = armed_flags(criteria, early_stop_enabled=early_stop_enabled, armed_ids=armed_ids)
        armed = [c for c, arm in zip(criteria, flags) if arm]
        if armed:
            results = [criterion_passed(c["score"], c["passed"], c["pass_threshold"], by_score=True)
                       for c in armed if c["has_result"]]
            if not results:
                return "not_graded", "armed"
            # An armed criterion without a result counts as not passed (weight in, score 0).
            judged = [bool(criterion_passed(c["score"], c["passed"], c["pass_threshold"], by_score=True))
                      if c["has_result"] else False for c in armed]
            ok = armed_gate_passed(judged, [c.get("weight") for c in armed], gate_threshold)
            return ("pass" if ok else "fail"), "armed"
    gating = [c for c, gates in zip(criteria, gating_flags(criteria)) if gates]
    results = [criterion_passed(c["score"], c["passed"], c["pass_threshold"]) for c in gating if c["has_result"]]
    if not results:
        return "not_graded", "none"
    ok = len(results) == len(gating) and all(r is True for r in results)
    return ("pass" if ok else "fail"), "all"


def derive_state(*, has_end: bool, closed: bool, last_seen_at: Optional[datetime], now: datetime,
                 abandon_after_s: float) -> str:
    """finished, running or abandoned."""
    if has_end:
        return "finished"
    if closed:
        return "abandoned"
    if last_seen_at is not None and last_seen_at.tzinfo is None:
        from datetime import timezone

        last_seen_at = last_seen_at.replace(tzinfo=timezone.utc)
    if last_seen_at is None or now - last_seen_at > timedelta(seconds=abandon_after_s):
        return "abandoned"
    return "running"


def _fits(value: Any) -> Optional[int]:
    """A token sum as the 64-bit column holds it; None (unknown) past it, never a failed write."""
    if value is None or not math.isfinite(value) or abs(value) >= 2**63:
        return None
    return int(value)


def _tok(end: dict[str, Any], key: str) -> Optional[int]:
    # read as the models read it, quoted numbers too (the stored record is as written: a
    # quoted run_end total was dropped and the steps' sum shown instead)
    tokens = end.get("tokens") if isinstance(end, dict) else None
    return int_of(tokens.get(key)) if isinstance(tokens, dict) else None


def tokens_unknown(end: Any) -> bool:
    """A run_end whose `tokens` names its total as null and gives neither input nor output:
    the run's tokens are unknown, never summed from its steps."""
    tokens = end.get("tokens") if isinstance(end, dict) else None
    return isinstance(tokens, dict) and "total" in tokens and tokens["total"] is None \
        and _tok(end, "input") is None and _tok(end, "output") is None


def _end_num(end: dict[str, Any], key: str) -> Optional[float]:
    return number_of(end.get(key)) if isinstance(end, dict) else None


#: Verdicts a run may record; `error` means it never produced a gradeable attempt.
RECORDED_VERDICTS = ("pass", "fail", "error", "not_graded")


_UPDATES: dict[tuple[str, tuple[str, ...]], Any] = {}


def update_row(conn: Connection, table: Any, row_id: int, values: dict[str, Any]) -> None:
    """`UPDATE table SET <values> WHERE id = row_id`, with one statement built per set of columns.

    Building `update(table).values(...)` on every call (a bind parameter, a coercion and a
    cache key per value) was most of the cost of a run's start, end and recompute: on a
    trace of 170 five-step runs they took 0.6 s of 1.5 s (docs/performance.md).
    """
    update_rows(conn, table, [(row_id, values)])


def update_rows(conn: Connection, table: Any, rows: list[tuple[int, dict[str, Any]]]) -> None:
    """`update_row` for many rows: one executemany per set of columns, in order within it (a
    batch of short runs paid a statement per run start, end and result: docs/performance.md)."""
    groups: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    for row_id, values in rows:
        params = {f"v_{c}": v for c, v in values.items()}
        params["p_id"] = row_id
        groups.setdefault(tuple(values), []).append(params)
    for cols, params_list in groups.items():
        key = (table.name, cols)
        stmt = _UPDATES.get(key)
        if stmt is None:
            stmt = (update(table).where(table.c.id == bindparam("p_id"))
                    .values({c: bindparam(f"v_{c}", type_=table.c[c].type) for c in cols}))
            _UPDATES[key] = stmt
        conn.execute(stmt, params_list)


def update_run(conn: Connection, pk: int, values: dict[str, Any]) -> None:
    """`update_row` for the runs table."""
    update_row(conn, RUNS, pk, values)


#: The run's own columns `recompute_runs` reads (and app.search indexes).
_RECOMPUTE_COLUMNS = tuple(RUNS.c[name] for name in ("end_record", "has_end", "started_at", "ended_at",
                                                      "early_stop_enabled", "closed", "last_seen_at",
                                                      "verdict_recorded", *search_texts.RUN_FIELDS,
                                                      *(f for f in search_texts.RUN_DATA_FIELDS if f != "end_record")))


_PKS: Any = bindparam("pks", expanding=True)
# Built once: the derived fields are recomputed after every batch, for every run it touched
# (see update_row). Each read covers a batch's runs at once: per run they were a dozen
# statements, most of a short run's ingest time (170 runs of 5 steps: docs/performance.md).
_RUN_SELECT = select(RUNS.c.id, *_RECOMPUTE_COLUMNS).where(RUNS.c.id.in_(_PKS))
_STEP_TOTALS = select(
    STEPS.c.run_pk,
    func.count(STEPS.c.id),
    # summed as floats: SQLite's integer sum() fails the whole batch on an overflow, and a
    # run's steps may hold many counts near the format's bound (`_fits` reads them back)
    func.sum(STEPS.c.tokens_input.cast(Float)),
    func.sum(STEPS.c.tokens_output.cast(Float)),
    func.sum(STEPS.c.tokens_total.cast(Float)),
    func.sum(STEPS.c.cost_usd),
    func.sum(STEPS.c.duration_s),
    func.sum(func.coalesce(STEPS.c.retry, False).cast(type_=RUNS.c.steps.type)),
).where(STEPS.c.run_pk.in_(_PKS)).group_by(STEPS.c.run_pk)
_EARLY_SELECT = select(EARLY.c.run_pk, EARLY.c.armed_criteria).where(EARLY.c.run_pk.in_(_PKS))
_TOOL_CALLS = select(STEPS.c.run_pk, func.sum(STEPS.c.tool_calls)).where(STEPS.c.run_pk.in_(_PKS)) \
    .group_by(STEPS.c.run_pk)
_CRITERIA_SELECT = select(CRITERIA.c.run_pk, CRITERIA.c.criterion_id, CRITERIA.c.stop_when, CRITERIA.c.gating,
                          CRITERIA.c.pass_threshold, CRITERIA.c.has_result, CRITERIA.c.score, CRITERIA.c.passed,
                          CRITERIA.c.has_spec).where(CRITERIA.c.run_pk.in_(_PKS)).order_by(CRITERIA.c.id)
_EARLY_RECORD_SELECT = select(EARLY.c.run_pk, EARLY.c.record).where(EARLY.c.run_pk.in_(_PKS))
_START_SELECT = select(RUNS.c.id, RUNS.c.start_record).where(RUNS.c.id.in_(_PKS))
_SPEC_SELECT = select(CRITERIA.c.run_pk, CRITERIA.c.criterion_id, CRITERIA.c.spec).where(CRITERIA.c.run_pk.in_(_PKS))
#: The columns recompute writes, in the one UPDATE it runs for a batch's runs.
_DERIVED = ("steps", "retries", "tokens_input", "tokens_output", "tokens_total", "tokens_cache_read",
            "tokens_cache_write", "tool_calls", "cost_usd", "agent_cost_usd", "elapsed_s", "agent_elapsed_s",
            "early_stopped", "verdict", "criteria_verdict", "gated_on", "state", "updated_at")
_UPDATE_DERIVED = (update(RUNS).where(RUNS.c.id == bindparam("p_id"))
                   .values({c: bindparam(f"v_{c}", type_=RUNS.c[c].type) for c in _DERIVED}))
#: Runs read per statement (each is an IN list).
CHUNK = 500


def recompute_runs(conn: Connection, pks: list[int], *, now: datetime, abandon_after_s: float,
                   docs: Optional[dict[int, str]] = None, new: frozenset[int] = frozenset()) -> list[dict[str, Any]]:
    """Recompute the derived columns of these runs from their rows; returns their search
    rows, their fields and their `docs` (the batch's critic and step texts), for the caller
    to add in one statement (app.search.insert_rows)."""
    rows: list[dict[str, Any]] = []
    for i in range(0, len(pks), CHUNK):
        rows += _recompute(conn, pks[i:i + CHUNK], now=now, abandon_after_s=abandon_after_s, docs=docs or {}, new=new)
    return rows


def _recompute(conn: Connection, pks: list[int], *, now: datetime, abandon_after_s: float,
               docs: dict[int, str], new: frozenset[int]) -> list[dict[str, Any]]:
    # Only the columns read below: the whole row decoded start_record, meta and the other
    # JSON columns with json.loads on every batch of every run (docs/performance.md).
    runs = {r["id"]: r for r in conn.execute(_RUN_SELECT, {"pks": pks}).mappings()}
    if not runs:
        return []
    pks = [pk for pk in pks if pk in runs]
    totals = {r[0]: tuple(r[1:]) for r in conn.execute(_STEP_TOTALS, {"pks": pks})}
    early = {pk: armed for pk, armed in conn.execute(_EARLY_SELECT, {"pks": pks})}
    crits: dict[int, list[dict[str, Any]]] = {}
    for r in conn.execute(_CRITERIA_SELECT, {"pks": pks}).mappings():
        c = dict(r)
        crits.setdefault(c.pop("run_pk"), []).append(c)
    # Weights and the gate threshold matter only to an early-stopped run's armed gate:
    # read (and JSON-decoded) for those runs alone.
    gated = [pk for pk in pks if pk in early and crits.get(pk)]
    gate_thresholds: dict[int, Optional[float]] = {}
    if gated:
        records = dict(conn.execute(_EARLY_RECORD_SELECT, {"pks": gated}).all())
        starts = dict(conn.execute(_START_SELECT, {"pks": gated}).all())
        weights: dict[int, dict[str, Any]] = {}
        for pk, cid, spec in conn.execute(_SPEC_SELECT, {"pks": gated}):
            if isinstance(spec, dict):
                weights.setdefault(pk, {})[cid] = weight_of(spec.get("weight"))
        for pk in gated:
            gate_thresholds[pk] = run_gate_threshold(records.get(pk), starts.get(pk))
            for c in crits[pk]:
                c["weight"] = weights.get(pk, {}).get(c["criterion_id"])
    counted = [pk for pk in pks if runs[pk]["has_end"] and (totals.get(pk) or (0,))[0]
               and _end_int(runs[pk]["end_record"], "tool_calls") is None]
    calls = {pk: n for pk, n in conn.execute(_TOOL_CALLS, {"pks": counted})} if counted else {}
    params = []
    search_rows: list[dict[str, Any]] = []
    for pk in pks:
        run = runs[pk]
        values = derived(run, totals.get(pk) or (0, None, None, None, None, None, 0), calls.get(pk),
                         early_stopped=pk in early, armed=early.get(pk), criteria=crits.get(pk, []),
                         gate_threshold=gate_thresholds.get(pk), now=now, abandon_after_s=abandon_after_s)
        params.append({"p_id": pk, **{f"v_{c}": values[c] for c in _DERIVED}})
        search_rows += search.rows_for(pk, run, docs.get(pk), new=pk in new)
    conn.execute(_UPDATE_DERIVED, params)
    return search_rows


def _end_int(end: Any, key: str) -> Optional[int]:
    return int_of(end.get(key)) if isinstance(end, dict) else None


def derived(run: Any, totals: tuple, tool_calls: Optional[int], *, early_stopped: bool, armed: Any,
            criteria: list[dict[str, Any]], gate_threshold: Optional[float], now: datetime,
            abandon_after_s: float) -> dict[str, Any]:
    """One run's derived columns from what is stored of it: its row (`run`), its steps'
    `totals` (count, input, output and total tokens, cost, duration, retries), their tool
    calls, its early stop and criteria (pure: the reads are `recompute_runs`')."""
    n_steps, t_in, t_out, t_total, cost, dur, retries = totals
    end = run["end_record"] or {}
    # a side whose steps summed past the column is unknown, and so is a total made from it
    overflow = any(v is not None and _fits(v) is None and _tok(end, key) is None
                   for v, key in ((t_in, "input"), (t_out, "output")))
    t_in, t_out, t_total = _fits(t_in), _fits(t_out), _fits(t_total)
    has_end = bool(run["has_end"])

    steps = _end_int(end, "steps")
    # the producer's own count when it gives one (docs/trace-format.md: totals): coder_eval's
    # total_assistant_turns is the figure its report shows, whatever its transcript holds
    steps = (n_steps or 0) if steps is None else steps
    tokens_input = _tok(end, "input") if _tok(end, "input") is not None else t_in
    tokens_output = _tok(end, "output") if _tok(end, "output") is not None else t_out
    tokens_total = _tok(end, "total")
    if tokens_unknown(end):
        # the producer says it has no count (coder_eval's null total_token_usage): its steps'
        # tokens, where some messages carried a few, are not the run's total
        tokens_input = tokens_output = None
    elif tokens_total is None:
        # A total made from the sides needs both: input alone was shown as the total
        # ("100 = 100 input + — output") and summed as if no output had been spent.
        tokens_total = t_total if t_total is not None else (
            _fits(tokens_input + tokens_output)
            if tokens_input is not None and tokens_output is not None and not overflow else None)
    cost_usd = _end_num(end, "cost_usd")
    if cost_usd is None:
        cost_usd = cost
    # A run that names its agent's slice (or says it is unknown, null) is read as written.
    agent_cost = _end_num(end, "agent_cost_usd") if "agent_cost_usd" in end else cost_usd
    elapsed = _end_num(end, "elapsed_s")
    if elapsed is None and run["started_at"] is not None and run["ended_at"] is not None \
            and run["ended_at"] >= run["started_at"]:
        # An end before the start says the clocks are wrong: no duration rather than 0.
        elapsed = (run["ended_at"] - run["started_at"]).total_seconds()
    if elapsed is None:
        elapsed = dur
    agent_elapsed = _end_num(end, "agent_elapsed_s") if "agent_elapsed_s" in end else elapsed
    recorded_calls = _end_int(end, "tool_calls")
    if recorded_calls is not None:
        tool_calls = recorded_calls
    elif not (has_end and n_steps):
        tool_calls = None  # counted once the run has ended
    elif tool_calls is not None:
        tool_calls = int(tool_calls)
    verdict, gated_on = derive_verdict(
        criteria,
        early_stopped=early_stopped,
        early_stop_enabled=bool(run["early_stop_enabled"]),
        armed_ids=(armed if isinstance(armed, list) else None),
        gate_threshold=gate_threshold,
    )
    state = derive_state(has_end=has_end, closed=bool(run["closed"]), last_seen_at=run["last_seen_at"],
                         now=now, abandon_after_s=abandon_after_s)
    recorded = run["verdict_recorded"]
    criteria_verdict = verdict if has_end else None
    if not has_end:
        verdict = None  # a run that has not finished is never shown as passing
    elif recorded in RECORDED_VERDICTS:
        verdict = recorded
    return dict(
        steps=steps,
        retries=int(retries or 0),
        tokens_input=tokens_input,
        tokens_output=tokens_output,
        tokens_total=tokens_total,
        tokens_cache_read=_tok(end, "cache_read"),
        tokens_cache_write=_tok(end, "cache_write"),
        tool_calls=tool_calls,
        cost_usd=cost_usd,
        agent_cost_usd=agent_cost,
        elapsed_s=elapsed,
        agent_elapsed_s=agent_elapsed,
        early_stopped=early_stopped,
        verdict=verdict,
        criteria_verdict=criteria_verdict,
        gated_on=gated_on if has_end else None,
        state=state,
        updated_at=now,
    )


def sweep_abandoned(conn: Connection, *, now: datetime, abandon_after_s: float) -> int:
    """Turn running runs that went silent into abandoned ones; returns how many."""
    cutoff = now - timedelta(seconds=abandon_after_s)
    result = conn.execute(
        update(RUNS)
        .where(and_(RUNS.c.state == "running", RUNS.c.has_end.is_(False),
                    (RUNS.c.last_seen_at.is_(None)) | (RUNS.c.last_seen_at < cutoff)))
        .values(state="abandoned", updated_at=now)  # updated_at: the list's cached figures key on it
    )
    return result.rowcount or 0
