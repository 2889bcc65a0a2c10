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
from sqlalchemy import JSON, delete, insert, select, update
from sqlalchemy.engine import Connection, Engine

from qita.engine.critic import ACTION_RANK, effective_action, strongest_action

from .. import derive
from . import pg_bulk
from ..models import RUNS, STEPS, CRITICS, EVENTS, CRITERIA, EARLY, RUN_TAGS as TAGS
from ..previews import preview_for


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


def _json_safe(value: Any) -> Any:
    """A JSON value with NUL characters in strings and keys replaced (PostgreSQL json rejects them)."""
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd") if "\x00" in value else value
    if isinstance(value, list):
        return [_json_safe(v) for v in value]
    if isinstance(value, dict):
        return {(_json_safe(k) if isinstance(k, str) else k): _json_safe(v) for k, v in value.items()}
    return value


def _raw_text(raw: Optional[bytes], record: dict[str, Any]) -> str:
    if raw is not None:
        text = raw.decode("utf-8", errors="replace")
    else:
        text = orjson.dumps(record, option=orjson.OPT_NON_STR_KEYS).decode()
    return text.replace("\x00", "\\u0000") if "\x00" in text else text


def _canonical(record: dict[str, Any]) -> bytes:
    return orjson.dumps(record, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS)


# Row builders for the SQLite fast path: positional tuples straight from the parsed record.
# Each value goes through a shortcut for the exact types the fast checks let through and
# falls back to the general function (`_num`, `_int`, `clean_text`) for anything else, so
# the stored values are the same. Only lines without a `\u0000` escape come here: without
# one no parsed string can hold a NUL, so no value needs scrubbing.
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


def _step_rows(pk: int, step: int, rec: dict[str, Any], raw: bytes) -> tuple[tuple, list[tuple]]:
    """The step row and its critic-output rows of a line without NUL escapes (see above)."""
    tokens = rec.get("tokens") or {}
    outs = rec.get("critic_outputs") or []
    critics = []
    rank = -1
    action_max = None
    total: float = 0
    n = 0
    for i, o in enumerate(outs):
        action = o.get("action")
        eff = effective_action(action)
        r = ACTION_RANK[eff]
        if r > rank:
            rank, action_max = r, eff
        score = _num_fast(o.get("score"))
        if score is not None:
            total += score
            n += 1
        critics.append((pk, step, i, _text_fast(o.get("critic")), _text_fast(action), eff, _text_fast(o.get("reason")),
                        score, _json_text(o.get("details"))))
    row = (pk, step, _text_fast(rec.get("ts"), 100), _num_fast(rec.get("duration_s")),
           _int_fast(tokens.get("input")), _int_fast(tokens.get("output")), _int_fast(tokens.get("total")),
           _num_fast(rec.get("cost_usd")), bool(rec.get("retry")), action_max, (total / n) if n else None,
           _raw_text(raw, rec), preview_for(len(raw), rec))
    return row, critics


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
        missing = [r for r in set(run_ids) if r not in self._run_pks]
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
              source_format: str = "qita", closed: bool = False) -> tuple[set[str], set[str], list[tuple[str, int, str]]]:
        """Apply `(record, raw line, file label, line number)` items in `conn`'s transaction.

        Returns (touched run ids, created run ids, warnings as (file, line, message, run id)).
        """
        created: set[str] = set()
        warnings: list[tuple[str, int, str, str]] = []
        self._ensure_runs(conn, {item[0]["run_id"] for item in items}, created)
        now = utcnow()
        touched: dict[int, str] = {}
        last_seen: dict[int, datetime] = {}

        # Rows as dicts (the portable path) or, on SQLite, as tuples in STEP_COLS / CRITIC_COLS / EVENT_COLS order.
        steps: dict[tuple[int, int], Any] = {}
        critic_rows: dict[tuple[int, int], list[Any]] = {}
        events: list[Any] = []
        criteria: dict[tuple[int, str], dict[str, Any]] = {}
        early: dict[int, dict[str, Any]] = {}
        starts: list[tuple[int, dict[str, Any], str, int]] = []
        ends: list[tuple[int, dict[str, Any], str, int]] = []
        utc_text: dict[tuple[int, int], str] = {}
        # SQLite takes positional rows straight to the driver, PostgreSQL by COPY; other drivers keep the dicts.
        tuples = self.dialect == "sqlite" or self._pg_copy

        run_pks = self._run_pks
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
                    # The trace's own clock says when the run was last active (an old file
                    # ingested today is not a live run); never later than now.
                    seen = min(ts, now)
                    if pk not in last_seen or seen > last_seen[pk]:
                        last_seen[pk] = seen
            rtype = rec["type"]
            # A NUL can only reach a parsed string through a \u0000 escape: a line
            # without one needs no scrubbing (that walk was a tenth of the ingest time).
            nul = raw is None or b"\\u0000" in raw
            if rtype == "step":
                step = rec["step"]
                if tuples and not nul:
                    steps[(pk, step)], critic_rows[(pk, step)] = _step_rows(pk, step, rec, raw)
                    continue
                tokens = rec.get("tokens") or {}
                outs = rec.get("critic_outputs") or []
                scores = [_num(o.get("score")) for o in outs]
                scores = [s for s in scores if s is not None]
                steps[(pk, step)] = {
                    "run_pk": pk,
                    "step": step,
                    "ts": clean_text(rec.get("ts"), 100),
                    "duration_s": _num(rec.get("duration_s")),
                    "tokens_input": _int(tokens.get("input")),
                    "tokens_output": _int(tokens.get("output")),
                    "tokens_total": _int(tokens.get("total")),
                    "cost_usd": _num(rec.get("cost_usd")),
                    "retry": bool(rec.get("retry")),
                    "critic_action": strongest_action(o.get("action") for o in outs),
                    "critic_score": (sum(scores) / len(scores)) if scores else None,
                    "record": _raw_text(raw, rec),
                }
                steps[(pk, step)]["preview"] = preview_for(len(steps[(pk, step)]["record"]), rec)
                critic_rows[(pk, step)] = [
                    {
                        "run_pk": pk,
                        "step": step,
                        "idx": i,
                        "critic": clean_text(o.get("critic")),
                        "action": clean_text(o.get("action")),
                        "effective_action": effective_action(o.get("action")),
                        "reason": clean_text(o.get("reason")),
                        "score": _num(o.get("score")),
                        "details": _json_safe(o.get("details")) if nul else o.get("details"),
                    }
                    for i, o in enumerate(outs)
                ]
                if tuples:
                    steps[(pk, step)] = tuple(steps[(pk, step)].values())
                    critic_rows[(pk, step)] = [(*tuple(r.values())[:-1], _json_text(r["details"]))
                                               for r in critic_rows[(pk, step)]]
            elif rtype == "criterion":
                cid = rec["id"]
                score = _num(rec.get("score"))
                passed = rec.get("passed") if isinstance(rec.get("passed"), bool) else None
                if score is not None and not 0 <= score <= 1:
                    warnings.append((label, line, f"criterion {cid!r}: score {score:g} is outside [0, 1]; kept as written",
                                     rec["run_id"]))
                criteria[(pk, cid)] = {
                    "run_pk": pk,
                    "criterion_id": clean_text(cid, 400),
                    # A record with neither score nor passed (an undecided live verdict) grades nothing.
                    "has_result": score is not None or passed is not None,
                    "score": score,
                    "passed": passed,
                    "live_verdict": rec.get("live_verdict"),
                    "decided_at_step": _int(rec.get("decided_at_step")),
                    "details": _json_safe(rec.get("details")),
                    "result": _json_safe(rec),
                }
            elif rtype == "early_stop":
                armed = rec.get("armed_criteria") or []
                early[pk] = {
                    "run_pk": pk,
                    "reason": clean_text(rec.get("reason")),
                    "deciding_criterion": clean_text(rec.get("deciding_criterion")),
                    "armed_criteria": _json_safe(armed),
                    "step": _int(rec.get("step")),
                    "tool_call_index": _int(rec.get("tool_call_index")),
                    "elapsed_s": _num(rec.get("elapsed_s")),
                    "turns_remaining": _int(rec.get("turns_remaining")),
                    "record": _json_safe(rec),
                }
            elif rtype == "run_start":
                starts.append((pk, rec, label, line))
            elif rtype == "run_end":
                ends.append((pk, rec, label, line))
            else:
                # `event` and every unknown type: kept as written, keyed by content.
                text = _raw_text(raw, rec)
                step = rec.get("step")
                if tuples and not nul:
                    ok = rec.get("ok")
                    phase = rec.get("phase") if rtype == "event" else f"[{rtype}]"
                    events.append((
                        pk,
                        step if type(step) is int and -_INT_MAX <= step <= _INT_MAX else _int_fast(step),
                        phase if type(phase) is str and len(phase) <= 200 else _text_fast(phase, 200),
                        ok if ok is True or ok is False else None,
                        ts_text if type(ts_text) is str and len(ts_text) <= 100 else _text_fast(ts_text, 100),
                        hashlib.sha1(_canonical(rec)).hexdigest(),
                        text,
                        preview_for(len(text), rec),
                    ))
                    continue
                events.append({
                    "run_pk": pk,
                    "step": _int(step),
                    "phase": clean_text(rec.get("phase") if rtype == "event" else f"[{rtype}]", 200),
                    "ok": rec.get("ok") if isinstance(rec.get("ok"), bool) else None,
                    "ts": clean_text(rec.get("ts"), 100),
                    "digest": hashlib.sha1(_canonical(rec)).hexdigest(),
                    "record": text,
                    "preview": preview_for(len(text), rec),
                })
                if tuples:
                    events[-1] = tuple(events[-1].values())

        for (pk, _len), text in utc_text.items():
            ts = parse_ts(text)
            if ts is None:
                continue
            seen = min(ts, now)
            if pk not in last_seen or seen > last_seen[pk]:
                last_seen[pk] = seen
        for pk, rec, label, line in (*starts, *ends):
            ts = rec.get("ts")
            if ts is not None and parse_ts(ts) is None:
                warnings.append((label, line, f"{rec['type']}: ts {str(ts)[:60]!r} is not an RFC 3339 time; "
                                              "the run's times are shown without it", rec["run_id"]))
            elapsed = _num(rec.get("elapsed_s"))
            if elapsed is not None and elapsed < 0:
                warnings.append((label, line, f"run_end: negative elapsed_s ({elapsed:g}); shown as written",
                                 rec["run_id"]))
        for pk, rec, label, line in starts:
            warn = self._apply_start(conn, pk, rec, source_format)
            if warn:
                warnings.append((label, line, warn, rec["run_id"]))
        for pk, rec, label, line in ends:
            warn = self._apply_end(conn, pk, rec)
            if warn:
                warnings.append((label, line, warn, rec["run_id"]))

        if steps:
            keys = list(steps)
            # Replace steps written again (a re-read file): their critic outputs go with them.
            if self.dialect == "sqlite":
                # One driver-level executemany: rendering big IN lists cost more than the delete.
                conn.exec_driver_sql("DELETE FROM critic_outputs WHERE run_pk = ? AND step = ?", keys)
            elif not self._pg_copy:  # pg_bulk replaces them only where a step was stored before
                for pk in {k[0] for k in keys}:
                    idxs = [k[1] for k in keys if k[0] == pk]
                    for i in range(0, len(idxs), 500):
                        conn.execute(delete(CRITICS).where(CRITICS.c.run_pk == pk, CRITICS.c.step.in_(idxs[i:i + 500])))
            if tuples:
                self._bulk_tuples(conn, STEPS, STEP_COLS, list(steps.values()), keys=["run_pk", "step"],
                                  on_conflict="update")
                self._bulk_tuples(conn, CRITICS, CRITIC_COLS, [r for outs in critic_rows.values() for r in outs])
            else:
                self._bulk(conn, STEPS, list(steps.values()), keys=["run_pk", "step"], on_conflict="update")
                self._bulk(conn, CRITICS, [r for outs in critic_rows.values() for r in outs])
        if events:
            if tuples:
                self._bulk_tuples(conn, EVENTS, EVENT_COLS, events, keys=["run_pk", "digest"], on_conflict="nothing")
            else:
                self._bulk(conn, EVENTS, events, keys=["run_pk", "digest"], on_conflict="nothing")
        for row in criteria.values():
            self._upsert_result(conn, row)
        for row in early.values():
            ins = self._insert(EARLY)
            cols = [c for c in row if c != "run_pk"]
            if hasattr(ins, "on_conflict_do_update"):
                ins = ins.on_conflict_do_update(index_elements=["run_pk"], set_={c: getattr(ins.excluded, c) for c in cols})
            conn.execute(ins, row)

        for pk in touched:
            seen = last_seen.get(pk)
            if seen is not None:
                conn.execute(
                    update(RUNS).where(RUNS.c.id == pk)
                    .where((RUNS.c.last_seen_at.is_(None)) | (RUNS.c.last_seen_at < seen))
                    .values(last_seen_at=seen)
                )
            else:
                # No timestamp in these records: the arrival time is all we know.
                conn.execute(update(RUNS).where(RUNS.c.id == pk, RUNS.c.last_seen_at.is_(None)).values(last_seen_at=now))
            if closed:
                conn.execute(update(RUNS).where(RUNS.c.id == pk).values(closed=True))
        return set(touched.values()), created, warnings

    def _upsert_result(self, conn: Connection, row: dict[str, Any]) -> None:
        existing = conn.execute(
            select(CRITERIA.c.id).where(CRITERIA.c.run_pk == row["run_pk"], CRITERIA.c.criterion_id == row["criterion_id"])
        ).first()
        if existing:
            conn.execute(update(CRITERIA).where(CRITERIA.c.id == existing[0]).values(
                **{k: v for k, v in row.items() if k not in ("run_pk", "criterion_id")}))
        else:
            pos = conn.execute(select(CRITERIA.c.position).where(CRITERIA.c.run_pk == row["run_pk"])
                               .order_by(CRITERIA.c.position.desc()).limit(1)).scalar()
            conn.execute(insert(CRITERIA), {**row, "position": (pos or 0) + 1000, "gating": True,
                                            "pass_threshold": 0.9, "has_spec": False})

    def _apply_start(self, conn: Connection, pk: int, rec: dict[str, Any], source_format: str) -> Optional[str]:
        row = conn.execute(select(RUNS.c.has_start, RUNS.c.start_record).where(RUNS.c.id == pk)).first()
        if row and row.has_start:
            if row.start_record is not None and _canonical(row.start_record) != _canonical(_json_safe(rec)):
                return ("second run_start for this run with different content: ignored, "
                        "the first one received is kept")
            return None
        budget = rec.get("budget") or {}
        early = rec.get("early_stop") or {}
        enabled = bool(early.get("enabled"))
        tags = [clean_text(t, 400) for t in (rec.get("tags") or []) if isinstance(t, str)]
        schema = rec.get("schema")
        conn.execute(update(RUNS).where(RUNS.c.id == pk).values(
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
            existing = conn.execute(select(CRITERIA.c.id).where(CRITERIA.c.run_pk == pk, CRITERIA.c.criterion_id == cid)).first()
            if existing:
                conn.execute(update(CRITERIA).where(CRITERIA.c.id == existing[0]).values(**values))
            else:
                conn.execute(insert(CRITERIA), {"run_pk": pk, "criterion_id": cid, "has_result": False, **values})
        return None

    def _apply_end(self, conn: Connection, pk: int, rec: dict[str, Any]) -> Optional[str]:
        row = conn.execute(select(RUNS.c.has_end, RUNS.c.end_record).where(RUNS.c.id == pk)).first()
        warn = None
        if row and row.has_end and row.end_record is not None:
            if _canonical(row.end_record) == _canonical(_json_safe(rec)):
                return None
            warn = "second run_end for this run with different content: the later one is used"
        raw_reason = rec.get("stop_reason")
        reason = LEGACY_STOP_REASONS.get(raw_reason, raw_reason) if isinstance(raw_reason, str) else None
        conn.execute(update(RUNS).where(RUNS.c.id == pk).values(
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
