"""Applying validated records to the store, one transaction per batch.

Every record type is written by natural key (run, step index, criterion id, event
digest), so applying the same record twice changes nothing, and records of one run
may arrive in any order and from several files. After each batch the derived fields
of the runs it touched are recomputed (app.derive), inside the same transaction, so
a reader never sees a half-applied batch.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Callable, Iterable, Optional

import orjson
from sqlalchemy import JSON, bindparam, delete, insert, select, update
from sqlalchemy.engine import Connection, Engine

from .. import derive, search
from ..jsontext import nul_safe as _json_safe
from ..models import CRITERIA, CRITICS, EARLY, EVENTS, RUNS, STEPS
from ..models import RUN_TAGS as TAGS
from . import pg_bulk
from .batch import ReadBatch
from .rows import (
    CRITIC_COLS,
    EVENT_COLS,
    STEP_COLS,
    _canonical,
    clean_text,
    criterion_row,
    early_stop_row,
    int_of,
    number_of,
    parse_ts,
    with_run_pk,
)

#: Old stop-reason spellings and what they mean today (the original stays visible).
LEGACY_STOP_REASONS = {"final_result": "final"}


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


class Gathered:
    """One batch's rows with their runs' keys, ready to write (`Applier.gather`)."""

    __slots__ = ("now", "label", "touched", "last_seen", "steps", "critics", "events", "criteria", "early",
                 "starts", "ends", "warnings")

    def __init__(self, now: datetime, label: str):
        self.now = now
        self.label = label
        self.touched: dict[int, str] = {}
        self.last_seen: dict[int, datetime] = {}
        self.steps: dict[tuple[int, int], tuple] = {}
        self.critics: dict[tuple[int, int], list[tuple]] = {}
        self.events: list[tuple] = []
        self.criteria: dict[tuple[int, str], dict[str, Any]] = {}
        self.early: dict[int, dict[str, Any]] = {}
        self.starts: list[tuple[int, dict[str, Any], str, int]] = []
        self.ends: list[tuple[int, dict[str, Any], str, int]] = []
        self.warnings: list[tuple[str, int, str, str]] = []

    def see(self, pk: int, ts: datetime) -> None:
        # The trace's own clock says when the run was last active (an old file ingested
        # today is not a live run); never later than now.
        seen = min(ts, self.now)
        if pk not in self.last_seen or seen > self.last_seen[pk]:
            self.last_seen[pk] = seen


def _dicts(cols: tuple[str, ...], rows: Iterable[tuple]) -> list[dict[str, Any]]:
    """Positional rows as the portable path's dicts."""
    return [dict(zip(cols, r)) for r in rows]


# Statements run per run and batch, built once (see `derive.update_row` for why).
def _provisional(record: Any) -> bool:
    """A run_start or run_end written from a summary (`provisional: true`): the full record,
    when it comes, takes its place without a warning (docs/trace-format.md)."""
    return isinstance(record, dict) and record.get("provisional") is True


_PKS: Any = bindparam("pks", expanding=True)
_STARTS_SEEN = select(RUNS.c.id, RUNS.c.has_start, RUNS.c.start_record).where(RUNS.c.id.in_(_PKS))
_ENDS_SEEN = select(RUNS.c.id, RUNS.c.has_end, RUNS.c.end_record).where(RUNS.c.id.in_(_PKS))
_CRITERIA_OF = select(CRITERIA.c.run_pk, CRITERIA.c.criterion_id, CRITERIA.c.id, CRITERIA.c.position).where(
    CRITERIA.c.run_pk.in_(_PKS))
_CRITERION_INSERT = insert(CRITERIA)
_HOLD = select(RUNS.c.id).where(RUNS.c.id.in_(bindparam("pks", expanding=True))).with_for_update(key_share=True)
_SEEN = bindparam("seen", type_=RUNS.c.last_seen_at.type)
_SEEN_LATER = (update(RUNS).where(RUNS.c.id == bindparam("pk"))
               .where(RUNS.c.last_seen_at.is_(None) | (RUNS.c.last_seen_at < _SEEN)).values(last_seen_at=_SEEN))
_SEEN_FIRST = (update(RUNS).where(RUNS.c.id == bindparam("pk"), RUNS.c.last_seen_at.is_(None))
               .values(last_seen_at=_SEEN))


#: run_end figures that cannot be below 0: a negative one is shown as written, and said.
_NON_NEGATIVE = ("elapsed_s", "agent_elapsed_s", "cost_usd", "agent_cost_usd", "steps", "tool_calls")

#: early_stop figures that cannot be below 0 (the step and tool call index are positions,
#: and a position out of range is the lane's to show): said as run_end's are.
_EARLY_NON_NEGATIVE = ("elapsed_s", "turns_remaining")


def _odd_totals(rec: dict[str, Any]) -> list[str]:
    """Warnings about a run_end's figures no run can have: a negative time, cost, count or
    token total, a score outside [0, 1] (each is shown as written: the producer's word)."""
    out = []
    for key in _NON_NEGATIVE:
        value = number_of(rec.get(key))
        if value is not None and value < 0:
            out.append(f"run_end: negative {key} ({value:g}); shown as written")
    tokens = rec.get("tokens")
    if isinstance(tokens, dict):
        for key in ("input", "output", "total"):
            value = number_of(tokens.get(key))
            if value is not None and value < 0:
                out.append(f"run_end: negative tokens.{key} ({value:g}); shown as written")
    score = number_of(rec.get("score"))
    if score is not None and not 0 <= score <= 1:
        out.append(f"run_end: score {score:g} is outside [0, 1]; shown as written")
    return out


def _by_runs(conn: Connection, stmt: Any, pks: Iterable[int]) -> list[Any]:
    """The rows `stmt` reads for these runs (`pks` bound 500 at a time)."""
    keys = list(dict.fromkeys(pks))
    out: list[Any] = []
    for i in range(0, len(keys), 500):
        out += conn.execute(stmt, {"pks": keys[i:i + 500]}).all()
    return out


def _criteria_of(conn: Connection, pks: Iterable[int]) -> tuple[dict[tuple[int, str], int], dict[int, int]]:
    """The stored criteria of these runs: their keys by (run, criterion id), and each run's last position."""
    ids: dict[tuple[int, str], int] = {}
    last: dict[int, int] = {}
    for pk, cid, row_id, position in _by_runs(conn, _CRITERIA_OF, pks):
        ids[(pk, cid)] = row_id
        if position is not None and (pk not in last or position > last[pk]):
            last[pk] = position
    return ids, last


def _write_criteria(conn: Connection, rows: list[tuple[int, Any, dict[str, Any]]],
                    new_row: Callable[[int, Any, dict[str, Any], dict[int, int]], dict[str, Any]]) -> None:
    """Criteria rows by (run, criterion id), in the order given: a stored one is updated, a
    new one inserted (`new_row` makes its row; it gets each run's last position to go on
    from), and a key given twice keeps its later values, as an update of the first would."""
    existing, last = _criteria_of(conn, {pk for pk, _cid, _values in rows})
    changed: list[tuple[int, dict[str, Any]]] = []
    new: dict[tuple[int, Any], dict[str, Any]] = {}
    for pk, cid, values in rows:
        if (pk, cid) in existing:
            changed.append((existing[(pk, cid)], values))
        elif (pk, cid) in new:
            new[(pk, cid)].update(values)
        else:
            new[(pk, cid)] = new_row(pk, cid, values, last)
    derive.update_rows(conn, CRITERIA, changed)
    if new:
        conn.execute(_CRITERION_INSERT, list(new.values()))


def _negative_limits(budget: Any) -> list[tuple[str, float]]:
    """A run_start budget's limits below zero, which no run can be held to."""
    if not isinstance(budget, dict):
        return []
    return [(key, value) for key, raw in budget.items() if key.startswith("max_")
            and (value := number_of(raw)) is not None and value < 0]


def _name(value: Any) -> Optional[str]:
    """An experiment's or variant's name as filed: a blank one ("", spaces) names nothing (its
    runs' overview heading, filter and compare links were empty, and `?experiment=` means any)."""
    text = clean_text(value, 400)
    return text if text is not None and text.strip() else None


def _start_values(rec: dict[str, Any], source_format: str) -> dict[str, Any]:
    """A run_start record's values for its run's columns."""
    budget = rec.get("budget") or {}
    early = rec.get("early_stop") or {}
    schema = rec.get("schema")
    return dict(
        task_id=clean_text(rec.get("task_id") or rec["run_id"], 400),
        experiment=_name(rec.get("experiment")),
        variant=_name(rec.get("variant")),
        replicate=int_of(rec.get("replicate")) or 0,
        objective=clean_text(rec.get("objective")),
        agent=clean_text(rec.get("agent"), 400),
        model=clean_text(rec.get("model"), 400),
        schema_version=clean_text(schema, 100) if schema is not None else None,
        source_format=source_format,
        started_ts=clean_text(rec.get("ts"), 100),
        started_at=parse_ts(rec.get("ts")),
        budget_max_steps=int_of(budget.get("max_steps")),
        budget_max_runtime_s=number_of(budget.get("max_runtime_seconds")),
        budget_max_tokens=int_of(budget.get("max_tokens")),
        budget_max_cost_usd=number_of(budget.get("max_cost_usd")),
        critics=_json_safe(rec.get("critics") or []),
        stop_criteria=_json_safe(rec.get("stop_criteria") or []),
        early_stop_enabled=bool(early.get("enabled")),
        tags=[clean_text(t, 400) for t in (rec.get("tags") or []) if isinstance(t, str)],
        meta=_json_safe(rec.get("metadata") or {}),
        start_record=_json_safe(rec),
        has_start=True,
    )


def _criterion_specs(rec: dict[str, Any]) -> list[tuple[Optional[str], dict[str, Any]]]:
    """A run_start's criteria as (criterion id, values of its row), in the order declared."""
    out = []
    for pos, spec in enumerate(rec.get("criteria") or []):
        threshold = number_of(spec.get("pass_threshold"))
        out.append((clean_text(spec["id"], 400), {
            "position": pos,
            "type": clean_text(spec.get("type")),
            "description": clean_text(spec.get("description")),
            "stop_when": spec.get("stop_when"),
            "gating": spec.get("gating", True) is not False,
            "pass_threshold": threshold if threshold is not None else 0.9,
            "has_spec": True,
            "spec": _json_safe(spec),
        }))
    return out


def _end_values(rec: dict[str, Any]) -> dict[str, Any]:
    """A run_end record's values for its run's columns."""
    raw_reason = rec.get("stop_reason")
    reason = LEGACY_STOP_REASONS.get(raw_reason, raw_reason) if isinstance(raw_reason, str) else None
    return dict(
        has_end=True,
        end_record=_json_safe(rec),
        ended_ts=clean_text(rec.get("ts"), 100),
        ended_at=parse_ts(rec.get("ts")),
        status=clean_text(rec.get("status"), 40),
        stop_reason=clean_text(reason, 200),
        stop_reason_raw=clean_text(raw_reason, 200),
        stop_detail=clean_text(rec.get("stop_detail")),
        final_result=clean_text(rec.get("final_result")),
        verdict_recorded=rec.get("verdict"),
        verdict_reason=clean_text(rec.get("verdict_reason")),
        source_status=clean_text(rec.get("source_status"), 100),
        score=number_of(rec.get("score")),
        failure_report=_json_safe(rec.get("failure_report")),
    )


class Applier:
    """Writes batches of records. One per writer; caches run keys between batches."""

    def __init__(self, engine: Engine):
        self.engine = engine
        self.dialect = engine.dialect.name
        self._run_pks: dict[str, int] = {}
        self._sql_cache: dict[tuple, str] = {}
        #: statements built once per applier (building one per run was most of a short run's cost)
        self._tags_insert: Any = None
        # PostgreSQL through psycopg 3 takes the SQLite path's positional rows by COPY (app.ingest.pg_bulk).
        self._pg_copy = pg_bulk.usable(engine)

    # -- helpers -----------------------------------------------------------------------
    def _insert(self, table):
        if self.dialect == "postgresql":
            from sqlalchemy.dialects.postgresql import insert as pg_insert

            return pg_insert(table)
        if self.dialect == "sqlite":
            from sqlalchemy.dialects.sqlite import insert as sqlite_insert

            return sqlite_insert(table)
        return insert(table)

    def _bulk(self, conn: Connection, table, rows: list[dict[str, Any]], *, keys: Optional[list[str]] = None,
              on_conflict: Optional[str] = None) -> None:
        """Insert many rows with one executemany; `on_conflict` is None, "nothing" or "update" (on `keys`).

        On SQLite the statement goes straight to the driver with JSON already encoded by
        orjson: SQLAlchemy's per-row parameter processing and json.dumps were most of the
        ingest time (docs/performance.md). Elsewhere the portable Core path is used.
        """
        if not rows:
            return
        cols = list(rows[0])
        if self.dialect != "sqlite":
            ins = self._insert(table)
            if on_conflict == "nothing" and hasattr(ins, "on_conflict_do_nothing"):
                ins = ins.on_conflict_do_nothing(index_elements=keys)
            elif on_conflict == "update" and hasattr(ins, "on_conflict_do_update"):
                ins = ins.on_conflict_do_update(index_elements=keys,
                                                set_={c: getattr(ins.excluded, c) for c in cols if c not in keys})
            conn.execute(ins, rows)
            return
        json_cols = {i for i, c in enumerate(cols) if isinstance(table.c[c].type, JSON)}
        if json_cols:
            params = [tuple(orjson.dumps(v, option=orjson.OPT_NON_STR_KEYS).decode() if i in json_cols else v
                            for i, v in enumerate(r.values())) for r in rows]
        else:
            params = [tuple(r.values()) for r in rows]
        self._bulk_tuples(conn, table, cols, params, keys=keys, on_conflict=on_conflict)

    def _bulk_tuples(self, conn: Connection, table, cols: list[str] | tuple[str, ...], params: list[tuple], *,
                     keys: Optional[list[str]] = None, on_conflict: Optional[str] = None) -> None:
        """SQLite: one driver-level executemany of positional rows (JSON already encoded); PostgreSQL: COPY."""
        if not params:
            return
        if self._pg_copy:
            return pg_bulk.write(conn, table.name, cols, params, keys=keys, on_conflict=on_conflict)
        sql = self._sql_cache.get((table.name, tuple(cols), on_conflict))
        if sql is None:
            sql = f"INSERT INTO {table.name} ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})"
            if on_conflict == "nothing":
                sql += f" ON CONFLICT ({', '.join(keys)}) DO NOTHING"
            elif on_conflict == "update":
                sets = ", ".join(f"{c} = excluded.{c}" for c in cols if c not in keys)
                sql += f" ON CONFLICT ({', '.join(keys)}) DO UPDATE SET {sets}"
            self._sql_cache[(table.name, tuple(cols), on_conflict)] = sql
        conn.exec_driver_sql(sql, params)

    def remember_run(self, run_id: str, pk: int) -> None:
        """Cache a run's key found elsewhere (the overwrite check reads it too)."""
        self._run_pks[run_id] = pk

    def forget(self, run_id: Optional[str] = None) -> None:
        """Drop cached run keys (after a delete or a rollback)."""
        if run_id is None:
            self._run_pks.clear()
        else:
            self._run_pks.pop(run_id, None)

    def _ensure_runs(self, conn: Connection, run_ids: Iterable[str], created: set[str]) -> None:
        # In the order the runs first appear, so new runs are numbered (and "stored last"
        # breaks compare's ties) as the file wrote them.
        missing = [r for r in dict.fromkeys(run_ids) if r not in self._run_pks]
        if not missing:
            return
        for i in range(0, len(missing), 500):
            chunk = missing[i : i + 500]
            for pk, rid in conn.execute(select(RUNS.c.id, RUNS.c.run_id).where(RUNS.c.run_id.in_(chunk))):
                self._run_pks[rid] = pk
        new = [r for r in missing if r not in self._run_pks]
        if new:
            now = utcnow()
            ins = self._insert(RUNS)
            if hasattr(ins, "on_conflict_do_nothing"):
                # Another board on the same PostgreSQL may create the run at the same moment.
                ins = ins.on_conflict_do_nothing(index_elements=["run_id"])
            conn.execute(
                ins,
                [
                    {"run_id": r, "task_id": r, "replicate": 0, "source_format": "qita", "state": "running",
                     "early_stop_enabled": False, "has_start": False, "has_end": False, "closed": False,
                     "early_stopped": False, "steps": 0, "retries": 0, "last_seen_at": None, "updated_at": now}
                    for r in new
                ],
            )
            for pk, rid in conn.execute(select(RUNS.c.id, RUNS.c.run_id).where(RUNS.c.run_id.in_(new))):
                self._run_pks[rid] = pk
            created.update(new)

    def _hold_runs(self, conn: Connection, run_ids: Iterable[str], created: set[str]) -> None:
        """PostgreSQL: hold the batch's runs `FOR KEY SHARE` until it commits, so a delete by
        another board (which takes them `FOR UPDATE` first: app.removal) waits for it, or it
        for the delete; a run deleted meanwhile is made again. This is what the foreign keys
        of steps, critic outputs and events checked row by row (migration 0016)."""
        wanted = {self._run_pks[r]: r for r in run_ids}
        held: set[int] = set()
        pks = list(wanted)
        for i in range(0, len(pks), 500):
            held.update(pk for (pk,) in conn.execute(_HOLD, {"pks": pks[i:i + 500]}))
        gone = [rid for pk, rid in wanted.items() if pk not in held]
        if gone:
            for rid in gone:
                self.forget(rid)
            self._ensure_runs(conn, gone, created)

    # -- the batch -----------------------------------------------------------------------
    def apply(self, conn: Connection, batch: ReadBatch, *, source_format: str = "qita", closed: bool = False,
              replacing: frozenset[str] = frozenset()) -> tuple[set[str], set[str], list[tuple[str, int, str, str]]]:
        """Apply a batch of records (app.ingest.batch) in `conn`'s transaction.

        `replacing`: runs a new version of the source that began them rewrites
        (app.ingest.overwrite, which reports it): their run_start is replaced too, and a
        changed run_end is not reported a second time.
        Returns (touched run ids, created run ids, warnings as (file, line, message, run id)).
        """
        created: set[str] = set()
        self._ensure_runs(conn, batch.runs, created)
        if self.dialect == "postgresql":
            self._hold_runs(conn, batch.runs, created)
        rows = self.gather(batch)
        self._write_boundaries(conn, rows, source_format, replacing)
        self._write_steps(conn, rows, created)
        self._write_events(conn, rows)
        self._write_results(conn, rows)
        self._write_last_seen(conn, rows, closed)
        return set(rows.touched.values()), created, rows.warnings

    def encode(self) -> bool:
        """Whether JSON values go to the driver as text: SQLite takes positional rows straight
        to the driver, PostgreSQL by COPY; other drivers take Python objects (the reader builds
        rows to match: app.ingest.batch)."""
        return self.dialect == "sqlite" or self._pg_copy

    def gather(self, batch: ReadBatch) -> Gathered:
        """The batch's rows with their runs' keys; nothing is written yet."""
        out = Gathered(utcnow(), batch.label)
        run_pks = self._run_pks
        touched = out.touched
        for run_id in batch.runs:
            touched[run_pks[run_id]] = run_id
        steps, critics = out.steps, out.critics
        for (run_id, step), (row, crits, _line) in batch.steps.items():
            pk = run_pks[run_id]
            steps[(pk, step)] = (pk, *row[1:])
            critics[(pk, step)] = [(pk, *c[1:]) for c in crits]
        out.events = with_run_pk(batch.events, run_pks)
        for (run_id, _len), text in batch.utc_text.items():
            ts = parse_ts(text)
            if ts is not None:
                out.see(run_pks[run_id], ts)
        for run_id, ts in batch.parsed_ts.items():
            out.see(run_pks[run_id], ts)
        label = batch.label
        for rec, _raw, line in batch.others:
            run_id = rec["run_id"]
            pk = run_pks[run_id]
            rtype = rec["type"]
            if rtype == "criterion":
                result = criterion_row(pk, rec)
                score = result["score"]
                if score is not None and not 0 <= score <= 1:
                    out.warnings.append((label, line, f"criterion {rec['id']!r}: score {score:g} is outside [0, 1]; "
                                                      "kept as written", run_id))
                out.criteria[(pk, rec["id"])] = result
            elif rtype == "early_stop":
                cut = out.early[pk] = early_stop_row(pk, rec)
                out.warnings.extend((label, line, f"early_stop: negative {key} ({cut[key]:g}); shown as written", run_id)
                                    for key in _EARLY_NON_NEGATIVE if cut[key] is not None and cut[key] < 0)
            elif rtype == "run_start":
                out.starts.append((pk, rec, label, line))
            else:  # run_end (app.ingest.batch.WHOLE_TYPES)
                out.ends.append((pk, rec, label, line))
        return out

    def _write_boundaries(self, conn: Connection, batch: Gathered, source_format: str,
                          replacing: frozenset[str] = frozenset()) -> None:
        """run_start and run_end records: the run's own columns, and warnings about their values.

        Each kind is written for the whole batch at once: one read of what the runs hold,
        then one executemany per statement (per run, a batch of five-step runs spent most of
        its time in a dozen statements each: docs/performance.md). Records of one run are
        still judged in the order read, against what the ones before them left."""
        warnings = batch.warnings
        for pk, rec, label, line in (*batch.starts, *batch.ends):
            ts = rec.get("ts")
            if ts is not None and parse_ts(ts) is None:
                warnings.append((label, line, f"{rec['type']}: ts {str(ts)[:60]!r} is not an RFC 3339 time; "
                                              "the run's times are shown without it", rec["run_id"]))
            if rec["type"] == "run_end":
                warnings.extend((label, line, message, rec["run_id"]) for message in _odd_totals(rec))
            else:
                warnings.extend((label, line, f"run_start: {key} {rec[key]!r} is blank; the run is filed under no "
                                              f"{key}", rec["run_id"])
                                for key in ("experiment", "variant") if _name(rec.get(key)) is None
                                and rec.get(key) is not None)
                budget = rec.get("budget")
                warnings.extend((label, line, f"run_start: budget {key} {value:g} is negative; it is shown, but no "
                                              "gauge is drawn against it", rec["run_id"])
                                for key, value in _negative_limits(budget))
        if batch.starts:
            self._write_starts(conn, batch, source_format, replacing)
        if batch.ends:
            seen = {pk: (has, record) for pk, has, record in _by_runs(conn, _ENDS_SEEN, [e[0] for e in batch.ends])}
            updates: list[tuple[int, dict[str, Any]]] = []
            for pk, rec, label, line in batch.ends:
                has, stored = seen.get(pk, (False, None))
                warn = None
                if has and stored is not None:
                    if _canonical(stored) == _canonical(_json_safe(rec)):
                        continue
                    if not (_provisional(stored) and not _provisional(rec)):
                        warn = "second run_end for this run with different content: the later one is used"
                values = _end_values(rec)
                seen[pk] = (True, values["end_record"])
                updates.append((pk, values))
                if warn and rec["run_id"] not in replacing:
                    warnings.append((label, line, warn, rec["run_id"]))
            derive.update_rows(conn, RUNS, updates)

    def _write_starts(self, conn: Connection, batch: Gathered, source_format: str,
                      replacing: frozenset[str]) -> None:
        """The batch's run_start records: a run's first (or a full one after a provisional
        one, or any in a new version of its source) sets its columns, tags and criteria."""
        seen = {pk: (has, record) for pk, has, record in _by_runs(conn, _STARTS_SEEN, [s[0] for s in batch.starts])}
        updates: list[tuple[int, dict[str, Any]]] = []
        tags: dict[int, list[str]] = {}
        specs: list[tuple[int, Any, dict[str, Any]]] = []
        for pk, rec, label, line in batch.starts:
            has, stored = seen.get(pk, (False, None))
            if rec["run_id"] in replacing and has:
                conn.execute(delete(TAGS).where(TAGS.c.run_pk == pk))  # the new version's tags only
                tags.pop(pk, None)
            elif has and not (_provisional(stored) and not _provisional(rec)):
                if stored is not None and _canonical(stored) != _canonical(_json_safe(rec)):
                    batch.warnings.append((label, line, "second run_start for this run with different content: "
                                                        "ignored, the first one received is kept", rec["run_id"]))
                continue
            values = _start_values(rec, source_format)
            seen[pk] = (True, values["start_record"])
            updates.append((pk, values))
            if values["tags"]:
                tags.setdefault(pk, []).extend(values["tags"])
            specs += [(pk, cid, spec) for cid, spec in _criterion_specs(rec)]
        derive.update_rows(conn, RUNS, updates)
        tag_rows = [{"run_pk": pk, "tag": t} for pk, names in tags.items() for t in dict.fromkeys(names)]
        if tag_rows:
            ins = self._tags_insert
            if ins is None:
                ins = self._insert(TAGS)
                if hasattr(ins, "on_conflict_do_nothing"):
                    ins = ins.on_conflict_do_nothing()
                self._tags_insert = ins
            conn.execute(ins, tag_rows)
        if specs:
            _write_criteria(conn, specs, lambda pk, cid, values, _last: {"run_pk": pk, "criterion_id": cid,
                                                                       "has_result": False, **values})

    def _write_steps(self, conn: Connection, batch: Gathered, created: set[str]) -> None:
        """Steps by (run, index), replacing any written before, with their critic outputs
        (`created`: the runs this transaction made, which hold none yet)."""
        if not batch.steps:
            return
        keys = list(batch.steps)
        critics = [r for outs in batch.critics.values() for r in outs]
        # Replace steps written again (a re-read file): their critic outputs go with them.
        if self.dialect == "sqlite":
            if created:
                # SQLite's one writer made these runs in this transaction: nothing to replace
                # (one index probe per step: 18,600 probes, 0.03 s of 106 MB).
                new = {self._run_pks[r] for r in created}
                keys = [k for k in keys if k[0] not in new]
            # One driver-level executemany: rendering big IN lists cost more than the delete.
            if keys:
                conn.exec_driver_sql("DELETE FROM critic_outputs WHERE run_pk = ? AND step = ?", keys)
            self._bulk_tuples(conn, STEPS, STEP_COLS, list(batch.steps.values()), keys=["run_pk", "step"],
                              on_conflict="update")
            self._bulk_tuples(conn, CRITICS, CRITIC_COLS, critics)
            return
        if self._pg_copy:  # pg_bulk replaces critic outputs only where a step was stored before
            self._bulk_tuples(conn, STEPS, STEP_COLS, list(batch.steps.values()), keys=["run_pk", "step"],
                              on_conflict="update")
            self._bulk_tuples(conn, CRITICS, CRITIC_COLS, critics)
            return
        for pk in {k[0] for k in keys}:
            idxs = [k[1] for k in keys if k[0] == pk]
            for i in range(0, len(idxs), 500):
                conn.execute(delete(CRITICS).where(CRITICS.c.run_pk == pk, CRITICS.c.step.in_(idxs[i:i + 500])))
        self._bulk(conn, STEPS, _dicts(STEP_COLS, batch.steps.values()), keys=["run_pk", "step"], on_conflict="update")
        self._bulk(conn, CRITICS, _dicts(CRITIC_COLS, critics))

    def _write_events(self, conn: Connection, batch: Gathered) -> None:
        """Events (and records of unknown types) by content digest: one read twice is kept once."""
        if not batch.events:
            return
        if self.dialect == "sqlite" or self._pg_copy:
            self._bulk_tuples(conn, EVENTS, EVENT_COLS, batch.events, keys=["run_pk", "digest"], on_conflict="nothing")
        else:
            self._bulk(conn, EVENTS, _dicts(EVENT_COLS, batch.events), keys=["run_pk", "digest"], on_conflict="nothing")

    def _write_results(self, conn: Connection, batch: Gathered) -> None:
        """Criterion results and early stops: the last one read for a key wins. A result for a
        criterion its run_start did not declare is added after the declared ones."""
        if batch.criteria:
            def undeclared(pk: int, cid: str, values: dict[str, Any], last: dict[int, int]) -> dict[str, Any]:
                # after the declared ones, in the order read
                last[pk] = (last.get(pk) or 0) + 1000
                return {"run_pk": pk, "criterion_id": cid, **values, "position": last[pk], "gating": True,
                        "pass_threshold": 0.9, "has_spec": False}

            _write_criteria(conn, [(row["run_pk"], row["criterion_id"],
                                    {k: v for k, v in row.items() if k not in ("run_pk", "criterion_id")})
                                   for row in batch.criteria.values()], undeclared)
        if batch.early:
            rows = list(batch.early.values())
            ins = self._insert(EARLY)
            cols = [c for c in rows[0] if c != "run_pk"]
            if hasattr(ins, "on_conflict_do_update"):
                ins = ins.on_conflict_do_update(index_elements=["run_pk"], set_={c: getattr(ins.excluded, c) for c in cols})
            conn.execute(ins, rows)

    def _write_last_seen(self, conn: Connection, batch: Gathered, closed: bool) -> None:
        """When each touched run was last active (never moved back), and `closed` when asked."""
        later = [{"pk": pk, "seen": batch.last_seen[pk]} for pk in batch.touched if pk in batch.last_seen]
        # No timestamp in these records: the arrival time is all we know.
        first = [{"pk": pk, "seen": batch.now} for pk in batch.touched if pk not in batch.last_seen]
        if later:
            conn.execute(_SEEN_LATER, later)
        if first:
            conn.execute(_SEEN_FIRST, first)
        if closed:
            derive.update_rows(conn, RUNS, [(pk, {"closed": True}) for pk in batch.touched])

    # -- derived fields -------------------------------------------------------------------
    def recompute(self, conn: Connection, run_ids: Iterable[str], *, abandon_after_s: float,
                  docs: Optional[dict[str, str]] = None, created: Iterable[str] = ()) -> None:
        """Recompute verdict, state and totals of the given runs (see app.derive), and index
        what search finds them by (`docs`: the batch's search documents by run id; `created`:
        the runs this transaction created, which hold no search row yet)."""
        pks = {self._run_pks[rid]: rid for rid in run_ids if rid in self._run_pks}
        created = set(created)
        rows = derive.recompute_runs(conn, list(pks), now=utcnow(), abandon_after_s=abandon_after_s,
                                     docs={pk: docs[rid] for pk, rid in pks.items() if rid in docs} if docs else None,
                                     new=frozenset(pk for pk, rid in pks.items() if rid in created))
        search.insert_rows(conn, rows)

    def add_warnings(self, conn: Connection, run_id: str, messages: list[str]) -> None:
        """Append warnings to a run (shown on its page), without duplicates."""
        pk = self._run_pks.get(run_id)
        if pk is None or not messages:
            return
        current = conn.execute(select(RUNS.c.warnings).where(RUNS.c.id == pk)).scalar() or []
        merged = list(dict.fromkeys([*current, *messages]))[:50]
        if merged != current:
            conn.execute(update(RUNS).where(RUNS.c.id == pk).values(warnings=merged))
