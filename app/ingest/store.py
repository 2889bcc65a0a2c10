"""Applying validated records to the store, one transaction per batch.

Every record type is written by natural key (run, step index, criterion id, event
digest), so applying the same record twice changes nothing, and records of one run
may arrive in any order and from several files. After each batch the derived fields
of the runs it touched are recomputed (app.derive), inside the same transaction, so
a reader never sees a half-applied batch.
"""

from __future__ import annotations

import hashlib
from datetime import datetime, timezone
from typing import Any, Iterable, Optional

import orjson
from sqlalchemy import JSON, bindparam, delete, insert, select, update
from sqlalchemy.engine import Connection, Engine

from qita.engine.critic import ACTION_RANK, effective_action

from .. import derive
from ..jsontext import nul_safe as _json_safe
from ..models import CRITERIA, CRITICS, EARLY, EVENTS, RUNS, STEPS
from ..models import RUN_TAGS as TAGS
from ..previews import preview_for
from . import pg_bulk

#: Old stop-reason spellings and what they mean today (the original stays visible).
LEGACY_STOP_REASONS = {"final_result": "final"}


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


def parse_ts(value: Any) -> Optional[datetime]:
    """An RFC 3339 string as an aware datetime, or None when it is not one."""
    if not isinstance(value, str) or not value or len(value) > 64:
        return None
    text = value.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    try:
        dt = datetime.fromisoformat(text)
    except ValueError:
        return None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    try:
        return dt.astimezone(timezone.utc)
    except (OverflowError, ValueError):
        return None


def clean_text(value: Any, limit: Optional[int] = None) -> Optional[str]:
    """A trace string made safe to store: NUL removed (PostgreSQL rejects it), length capped."""
    if value is None:
        return None
    if not isinstance(value, str):
        value = orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode() if not isinstance(value, (int, float, bool)) else str(value)
    if "\x00" in value:
        value = value.replace("\x00", "\ufffd")
    if limit is not None and len(value) > limit:
        value = value[:limit]
    return value


def _num(value: Any) -> Optional[float]:
    if type(value) is str:
        # The models accept a numeric string ("0.5") for a number; so does the store.
        try:
            value = float(value)
        except ValueError:
            return None
        return value if value == value and abs(value) != float("inf") else None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _int(value: Any) -> Optional[int]:
    if type(value) is str:
        try:
            value = int(value.strip())
        except ValueError:
            return None
    elif type(value) is float and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    if abs(value) > 2**62:
        return None
    return value


def _raw_text(raw: Optional[bytes], record: dict[str, Any]) -> str:
    if raw is not None:
        text = raw.decode("utf-8", errors="replace")
    else:
        text = orjson.dumps(record, option=orjson.OPT_NON_STR_KEYS).decode()
    return text.replace("\x00", "\\u0000") if "\x00" in text else text


def _canonical(record: dict[str, Any]) -> bytes:
    return orjson.dumps(record, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS)


# Row builders: one per record type, positional tuples in STEP_COLS / CRITIC_COLS /
# EVENT_COLS order, for both dialects (PostgreSQL gets them zipped into dicts). Each value
# goes through a shortcut for the exact types the fast checks let through and falls back
# to the general function (`_num`, `_int`, `clean_text`) for anything else. A NUL can only
# reach a parsed string through a `\u0000` escape, so only lines with one (`scrub`) pay
# for NUL scrubbing: that walk was a tenth of the ingest time. `encode` says JSON values
# go to the driver as text (SQLite, encoded by orjson) rather than as Python objects.
STEP_COLS = ("run_pk", "step", "ts", "duration_s", "tokens_input", "tokens_output", "tokens_total", "cost_usd",
             "retry", "critic_action", "critic_score", "record", "preview")
CRITIC_COLS = ("run_pk", "step", "idx", "critic", "action", "effective_action", "reason", "score", "details")
EVENT_COLS = ("run_pk", "step", "phase", "ok", "ts", "digest", "record", "preview")
_INT_MAX = 2**62


def _num_fast(v: Any) -> Optional[float]:
    t = type(v)
    if t is float:
        return v
    if t is int:
        return float(v)
    return None if v is None else _num(v)


def _int_fast(v: Any) -> Optional[int]:
    if type(v) is int:
        return v if -_INT_MAX <= v <= _INT_MAX else None
    return None if v is None else _int(v)


def _text_fast(v: Any, limit: Optional[int] = None) -> Optional[str]:
    if type(v) is str:
        return v if limit is None or len(v) <= limit else v[:limit]
    return clean_text(v, limit)


def _json_text(v: Any) -> str:
    return orjson.dumps(v, option=orjson.OPT_NON_STR_KEYS).decode()


def _json_value(v: Any, scrub: bool, encode: bool) -> Any:
    if scrub:
        v = _json_safe(v)
    return _json_text(v) if encode else v


def step_rows(pk: int, step: int, rec: dict[str, Any], raw: Optional[bytes], *, scrub: bool,
              encode: bool) -> tuple[tuple, list[tuple]]:
    """A step record's row and its critic-output rows."""
    text = clean_text if scrub else _text_fast
    tokens = rec.get("tokens") or {}
    critics = []
    rank = -1
    action_max = None
    total: float = 0
    n = 0
    for i, o in enumerate(rec.get("critic_outputs") or ()):
        action = o.get("action")
        eff = effective_action(action)
        r = ACTION_RANK[eff]
        if r > rank:
            rank, action_max = r, eff
        score = _num_fast(o.get("score"))
        if score is not None:
            total += score
            n += 1
        critics.append((pk, step, i, text(o.get("critic")), text(action), eff, text(o.get("reason")), score,
                        _json_value(o.get("details"), scrub, encode)))
    record = _raw_text(raw, rec)
    row = (pk, step, text(rec.get("ts"), 100), _num_fast(rec.get("duration_s")),
           _int_fast(tokens.get("input")), _int_fast(tokens.get("output")), _int_fast(tokens.get("total")),
           _num_fast(rec.get("cost_usd")), bool(rec.get("retry")), action_max, (total / n) if n else None,
           record, preview_for(len(record), rec))
    return row, critics


def event_row(pk: int, rtype: str, rec: dict[str, Any], raw: Optional[bytes], *, scrub: bool) -> tuple:
    """The row of an `event` or of a record of a type this board does not know (kept as written)."""
    record = _raw_text(raw, rec)
    step = rec.get("step")
    ok = rec.get("ok")
    phase = rec.get("phase") if rtype == "event" else f"[{rtype}]"
    ts = rec.get("ts")
    if scrub:
        phase, ts = clean_text(phase, 200), clean_text(ts, 100)
    else:
        phase = phase if type(phase) is str and len(phase) <= 200 else _text_fast(phase, 200)
        ts = ts if type(ts) is str and len(ts) <= 100 else _text_fast(ts, 100)
    return (pk, step if type(step) is int and -_INT_MAX <= step <= _INT_MAX else _int_fast(step), phase,
            ok if ok is True or ok is False else None, ts, hashlib.sha1(_canonical(rec)).hexdigest(), record,
            preview_for(len(record), rec))


def criterion_row(pk: int, rec: dict[str, Any]) -> dict[str, Any]:
    """A criterion result's values (its position and spec come from run_start)."""
    score = _num(rec.get("score"))
    passed = rec.get("passed") if isinstance(rec.get("passed"), bool) else None
    return {
        "run_pk": pk,
        "criterion_id": clean_text(rec["id"], 400),
        # A record with neither score nor passed (an undecided live verdict) grades nothing.
        "has_result": score is not None or passed is not None,
        "score": score,
        "passed": passed,
        "live_verdict": rec.get("live_verdict"),
        "decided_at_step": _int(rec.get("decided_at_step")),
        "details": _json_safe(rec.get("details")),
        "result": _json_safe(rec),
    }


def early_stop_row(pk: int, rec: dict[str, Any]) -> dict[str, Any]:
    """An early_stop record's values (one per run: the last one read wins)."""
    return {
        "run_pk": pk,
        "reason": clean_text(rec.get("reason")),
        "deciding_criterion": clean_text(rec.get("deciding_criterion")),
        "armed_criteria": _json_safe(rec.get("armed_criteria") or []),
        "step": _int(rec.get("step")),
        "tool_call_index": _int(rec.get("tool_call_index")),
        "elapsed_s": _num(rec.get("elapsed_s")),
        "turns_remaining": _int(rec.get("turns_remaining")),
        "record": _json_safe(rec),
    }


class Gathered:
    """One batch's records sorted into rows by type, in one pass (`Applier.gather`)."""

    __slots__ = ("now", "touched", "last_seen", "utc_text", "steps", "critics", "events", "criteria", "early",
                 "starts", "ends", "warnings")

    def __init__(self, now: datetime):
        self.now = now
        self.touched: dict[int, str] = {}
        self.last_seen: dict[int, datetime] = {}
        #: newest UTC "…Z" stamp text per (run, length): parsed once per batch in `settle_times`
        self.utc_text: dict[tuple[int, int], str] = {}
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

    def settle_times(self) -> None:
        """Parse the newest UTC stamp kept per run and length into `last_seen`."""
        for (pk, _len), text in self.utc_text.items():
            ts = parse_ts(text)
            if ts is not None:
                self.see(pk, ts)


def _dicts(cols: tuple[str, ...], rows: Iterable[tuple]) -> list[dict[str, Any]]:
    """Positional rows as the portable path's dicts."""
    return [dict(zip(cols, r)) for r in rows]


# Statements run per run and batch, built once (see `derive.update_row` for why).
def _provisional(record: Any) -> bool:
    """A run_start or run_end written from a summary (`provisional: true`): the full record,
    when it comes, takes its place without a warning (docs/trace-format.md)."""
    return isinstance(record, dict) and record.get("provisional") is True


_START_SEEN = select(RUNS.c.has_start, RUNS.c.start_record).where(RUNS.c.id == bindparam("pk"))
_END_SEEN = select(RUNS.c.has_end, RUNS.c.end_record).where(RUNS.c.id == bindparam("pk"))
_CRITERION_ID = select(CRITERIA.c.id).where(CRITERIA.c.run_pk == bindparam("pk"),
                                            CRITERIA.c.criterion_id == bindparam("cid"))
_LAST_POSITION = (select(CRITERIA.c.position).where(CRITERIA.c.run_pk == bindparam("pk"))
                  .order_by(CRITERIA.c.position.desc()).limit(1))
_CRITERION_INSERT = insert(CRITERIA)
_SEEN = bindparam("seen", type_=RUNS.c.last_seen_at.type)
_SEEN_LATER = (update(RUNS).where(RUNS.c.id == bindparam("pk"))
               .where(RUNS.c.last_seen_at.is_(None) | (RUNS.c.last_seen_at < _SEEN)).values(last_seen_at=_SEEN))
_SEEN_FIRST = (update(RUNS).where(RUNS.c.id == bindparam("pk"), RUNS.c.last_seen_at.is_(None))
               .values(last_seen_at=_SEEN))


class Applier:
    """Writes batches of records. One per writer; caches run keys between batches."""

    def __init__(self, engine: Engine):
        self.engine = engine
        self.dialect = engine.dialect.name
        self._run_pks: dict[str, int] = {}
        self._sql_cache: dict[tuple, str] = {}
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

    # -- the batch -----------------------------------------------------------------------
    def apply(self, conn: Connection, items: list[tuple[dict[str, Any], Optional[bytes], str, int]], *,
              source_format: str = "qita", closed: bool = False, replacing: frozenset[str] = frozenset(),
              ) -> tuple[set[str], set[str], list[tuple[str, int, str, str]]]:
        """Apply `(record, raw line, file label, line number)` items in `conn`'s transaction.

        `replacing`: runs a new version of the source that began them rewrites
        (app.ingest.overwrite, which reports it): their run_start is replaced too, and a
        changed run_end is not reported a second time.
        Returns (touched run ids, created run ids, warnings as (file, line, message, run id)).
        """
        created: set[str] = set()
        self._ensure_runs(conn, [item[0]["run_id"] for item in items], created)
        batch = self.gather(items)
        batch.settle_times()
        self._write_boundaries(conn, batch, source_format, replacing)
        self._write_steps(conn, batch)
        self._write_events(conn, batch)
        self._write_results(conn, batch)
        self._write_last_seen(conn, batch, closed)
        return set(batch.touched.values()), created, batch.warnings

    def gather(self, items: list[tuple[dict[str, Any], Optional[bytes], str, int]]) -> Gathered:
        """Sort a batch's records into rows by type, in one pass; nothing is written yet."""
        batch = Gathered(utcnow())
        # SQLite takes positional rows straight to the driver, PostgreSQL by COPY; other drivers keep the dicts.
        encode = self.dialect == "sqlite" or self._pg_copy
        run_pks = self._run_pks
        touched, utc_text = batch.touched, batch.utc_text
        steps, critics, events = batch.steps, batch.critics, batch.events
        for rec, raw, label, line in items:
            run_id = rec["run_id"]
            pk = run_pks[run_id]
            touched[pk] = run_id
            ts_text = rec.get("ts")
            if type(ts_text) is str and ts_text[-1:] == "Z" and ts_text[10:11] == "T":
                # UTC stamps of one length order as text: keep the newest string per run
                # and length, and parse only those (parsing every line was a tenth of apply).
                key = (pk, len(ts_text))
                if ts_text > utc_text.get(key, ""):
                    utc_text[key] = ts_text
            elif ts_text is not None:
                ts = parse_ts(ts_text)
                if ts is not None:
                    batch.see(pk, ts)
            rtype = rec["type"]
            scrub = raw is None or b"\\u0000" in raw
            if rtype == "step":
                step = rec["step"]
                steps[(pk, step)], critics[(pk, step)] = step_rows(pk, step, rec, raw, scrub=scrub, encode=encode)
            elif rtype == "event":
                events.append(event_row(pk, rtype, rec, raw, scrub=scrub))
            elif rtype == "criterion":
                row = criterion_row(pk, rec)
                score = row["score"]
                if score is not None and not 0 <= score <= 1:
                    batch.warnings.append((label, line, f"criterion {rec['id']!r}: score {score:g} is outside [0, 1]; "
                                                        "kept as written", run_id))
                batch.criteria[(pk, rec["id"])] = row
            elif rtype == "early_stop":
                batch.early[pk] = early_stop_row(pk, rec)
            elif rtype == "run_start":
                batch.starts.append((pk, rec, label, line))
            elif rtype == "run_end":
                batch.ends.append((pk, rec, label, line))
            else:
                # Every unknown type: kept as written, keyed by content, like an event.
                events.append(event_row(pk, rtype, rec, raw, scrub=scrub))
        return batch

    def _write_boundaries(self, conn: Connection, batch: Gathered, source_format: str,
                          replacing: frozenset[str] = frozenset()) -> None:
        """run_start and run_end records: the run's own columns, and warnings about their values."""
        warnings = batch.warnings
        for pk, rec, label, line in (*batch.starts, *batch.ends):
            ts = rec.get("ts")
            if ts is not None and parse_ts(ts) is None:
                warnings.append((label, line, f"{rec['type']}: ts {str(ts)[:60]!r} is not an RFC 3339 time; "
                                              "the run's times are shown without it", rec["run_id"]))
            elapsed = _num(rec.get("elapsed_s"))
            if elapsed is not None and elapsed < 0:
                warnings.append((label, line, f"run_end: negative elapsed_s ({elapsed:g}); shown as written",
                                 rec["run_id"]))
        for pk, rec, label, line in batch.starts:
            warn = self._apply_start(conn, pk, rec, source_format, replace=rec["run_id"] in replacing)
            if warn:
                warnings.append((label, line, warn, rec["run_id"]))
        for pk, rec, label, line in batch.ends:
            warn = self._apply_end(conn, pk, rec)
            if warn and rec["run_id"] not in replacing:
                warnings.append((label, line, warn, rec["run_id"]))

    def _write_steps(self, conn: Connection, batch: Gathered) -> None:
        """Steps by (run, index), replacing any written before, with their critic outputs."""
        if not batch.steps:
            return
        keys = list(batch.steps)
        critics = [r for outs in batch.critics.values() for r in outs]
        # Replace steps written again (a re-read file): their critic outputs go with them.
        if self.dialect == "sqlite":
            # One driver-level executemany: rendering big IN lists cost more than the delete.
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
        """Criterion results and early stops: the last one read for a key wins."""
        for row in batch.criteria.values():
            self._upsert_result(conn, row)
        for row in batch.early.values():
            ins = self._insert(EARLY)
            cols = [c for c in row if c != "run_pk"]
            if hasattr(ins, "on_conflict_do_update"):
                ins = ins.on_conflict_do_update(index_elements=["run_pk"], set_={c: getattr(ins.excluded, c) for c in cols})
            conn.execute(ins, row)

    def _write_last_seen(self, conn: Connection, batch: Gathered, closed: bool) -> None:
        """When each touched run was last active (never moved back), and `closed` when asked."""
        for pk in batch.touched:
            seen = batch.last_seen.get(pk)
            if seen is not None:
                conn.execute(_SEEN_LATER, {"pk": pk, "seen": seen})
            else:
                # No timestamp in these records: the arrival time is all we know.
                conn.execute(_SEEN_FIRST, {"pk": pk, "seen": batch.now})
            if closed:
                derive.update_run(conn, pk, {"closed": True})

    def _upsert_result(self, conn: Connection, row: dict[str, Any]) -> None:
        existing = conn.execute(_CRITERION_ID, {"pk": row["run_pk"], "cid": row["criterion_id"]}).first()
        if existing:
            derive.update_row(conn, CRITERIA, existing[0],
                              {k: v for k, v in row.items() if k not in ("run_pk", "criterion_id")})
        else:
            pos = conn.execute(_LAST_POSITION, {"pk": row["run_pk"]}).scalar()
            conn.execute(_CRITERION_INSERT, {**row, "position": (pos or 0) + 1000, "gating": True,
                                            "pass_threshold": 0.9, "has_spec": False})

    def _apply_start(self, conn: Connection, pk: int, rec: dict[str, Any], source_format: str, *,
                     replace: bool = False) -> Optional[str]:
        row = conn.execute(_START_SEEN, {"pk": pk}).first()
        if replace and row and row.has_start:
            conn.execute(delete(TAGS).where(TAGS.c.run_pk == pk))  # the new version's tags only
        elif row and row.has_start and not (_provisional(row.start_record) and not _provisional(rec)):
            if row.start_record is not None and _canonical(row.start_record) != _canonical(_json_safe(rec)):
                return ("second run_start for this run with different content: ignored, "
                        "the first one received is kept")
            return None
        budget = rec.get("budget") or {}
        early = rec.get("early_stop") or {}
        enabled = bool(early.get("enabled"))
        tags = [clean_text(t, 400) for t in (rec.get("tags") or []) if isinstance(t, str)]
        schema = rec.get("schema")
        derive.update_run(conn, pk, dict(
            task_id=clean_text(rec.get("task_id") or rec["run_id"], 400),
            experiment=clean_text(rec.get("experiment"), 400),
            variant=clean_text(rec.get("variant"), 400),
            replicate=_int(rec.get("replicate")) or 0,
            objective=clean_text(rec.get("objective")),
            agent=clean_text(rec.get("agent"), 400),
            model=clean_text(rec.get("model"), 400),
            schema_version=clean_text(schema, 100) if schema is not None else None,
            source_format=source_format,
            started_ts=clean_text(rec.get("ts"), 100),
            started_at=parse_ts(rec.get("ts")),
            budget_max_steps=_int(budget.get("max_steps")),
            budget_max_runtime_s=_num(budget.get("max_runtime_seconds")),
            budget_max_tokens=_int(budget.get("max_tokens")),
            budget_max_cost_usd=_num(budget.get("max_cost_usd")),
            critics=_json_safe(rec.get("critics") or []),
            stop_criteria=_json_safe(rec.get("stop_criteria") or []),
            early_stop_enabled=enabled,
            tags=tags,
            meta=_json_safe(rec.get("metadata") or {}),
            start_record=_json_safe(rec),
            has_start=True,
        ))
        if tags:
            ins = self._insert(TAGS)
            if hasattr(ins, "on_conflict_do_nothing"):
                ins = ins.on_conflict_do_nothing()
            conn.execute(ins, [{"run_pk": pk, "tag": t} for t in dict.fromkeys(tags)])
        for pos, spec in enumerate(rec.get("criteria") or []):
            stop_when = spec.get("stop_when")
            values = {
                "position": pos,
                "type": clean_text(spec.get("type")),
                "description": clean_text(spec.get("description")),
                "stop_when": stop_when,
                "gating": spec.get("gating", True) is not False,
                "pass_threshold": _num(spec.get("pass_threshold")) if _num(spec.get("pass_threshold")) is not None else 0.9,
                "has_spec": True,
                "spec": _json_safe(spec),
            }
            cid = clean_text(spec["id"], 400)
            existing = conn.execute(_CRITERION_ID, {"pk": pk, "cid": cid}).first()
            if existing:
                derive.update_row(conn, CRITERIA, existing[0], values)
            else:
                conn.execute(_CRITERION_INSERT, {"run_pk": pk, "criterion_id": cid, "has_result": False, **values})
        return None

    def _apply_end(self, conn: Connection, pk: int, rec: dict[str, Any]) -> Optional[str]:
        row = conn.execute(_END_SEEN, {"pk": pk}).first()
        warn = None
        if row and row.has_end and row.end_record is not None:
            if _canonical(row.end_record) == _canonical(_json_safe(rec)):
                return None
            if not (_provisional(row.end_record) and not _provisional(rec)):
                warn = "second run_end for this run with different content: the later one is used"
        raw_reason = rec.get("stop_reason")
        reason = LEGACY_STOP_REASONS.get(raw_reason, raw_reason) if isinstance(raw_reason, str) else None
        derive.update_run(conn, pk, dict(
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
            score=_num(rec.get("score")),
            failure_report=_json_safe(rec.get("failure_report")),
        ))
        return warn

    # -- derived fields -------------------------------------------------------------------
    def recompute(self, conn: Connection, run_ids: Iterable[str], *, abandon_after_s: float) -> None:
        """Recompute verdict, state and totals of the given runs (see app.derive)."""
        now = utcnow()
        for rid in run_ids:
            pk = self._run_pks.get(rid)
            if pk is None:
                continue
            derive.recompute_run(conn, pk, now=now, abandon_after_s=abandon_after_s)

    def add_warnings(self, conn: Connection, run_id: str, messages: list[str]) -> None:
        """Append warnings to a run (shown on its page), without duplicates."""
        pk = self._run_pks.get(run_id)
        if pk is None or not messages:
            return
        current = conn.execute(select(RUNS.c.warnings).where(RUNS.c.id == pk)).scalar() or []
        merged = list(dict.fromkeys([*current, *messages]))[:50]
        if merged != current:
            conn.execute(update(RUNS).where(RUNS.c.id == pk).values(warnings=merged))
