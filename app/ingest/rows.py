"""Records to row values: pure functions, one per record type, shared by the reader
(which builds rows as each line is read, app.ingest.batch) and the writer (app.ingest.store).

Rows are positional tuples in STEP_COLS / CRITIC_COLS / EVENT_COLS order with the run's
id where its first column, `run_pk`, goes: the reader cannot know a run's key (it may run
in another process, app.ingest.reader), so the writer puts it in that place
(`with_run_pk`). JSON values go to the driver as text (`encode`: SQLite, and PostgreSQL
by COPY) or as Python objects.
"""

from __future__ import annotations

from datetime import datetime, timezone
from hashlib import sha1
from typing import Any, Iterable, Optional

import orjson

from qita.engine.critic import ACTION_RANK, effective_action

from ..jsontext import dumps_deep
from ..jsontext import nul_safe as _json_safe
from ..previews import PREVIEW_MIN_CHARS, make_preview


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
        value = _dumps(value, orjson.OPT_NON_STR_KEYS).decode() if not isinstance(value, (int, float, bool)) else str(value)
    if "\x00" in value:
        value = value.replace("\x00", "\ufffd")
    if limit is not None and len(value) > limit:
        value = value[:limit]
    return value


def number_of(value: Any) -> Optional[float]:
    """A stored record's number as the models read it: a numeric string ("0.5") counts, NaN,
    infinities, booleans and other types do not (steps here, run_end totals in app.derive)."""
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


def int_of(value: Any) -> Optional[int]:
    """A stored record's integer as the models read it: "100" and "100.0" count; a value past
    2**62 does not (it fits no column)."""
    if type(value) is str:
        try:
            value = int(value.strip())
        except ValueError:
            # "100.0": the models (qita.format) read a quoted integral number as that integer
            try:
                number = float(value)
            except ValueError:
                return None
            if not number.is_integer():
                return None
            value = int(number)
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
        text = _dumps(record, orjson.OPT_NON_STR_KEYS).decode()
    return text.replace("\x00", "\\u0000") if "\x00" in text else text


def _record_text(raw: Optional[bytes], record: dict[str, Any], at: Optional[int]) -> tuple[Any, int]:
    """A record's stored text and its length in characters; where the line lies in its file
    instead (`at`: its first byte, and its length in bytes), when the writer reads the text
    from the file itself (app.ingest.reader: pickling every line's text to the writer was
    a fifth of the reader process's time, and reading it back from the pipe cost the writer
    as much as reading the file)."""
    if at is None or raw is None:
        text = _raw_text(raw, record)
        return text, len(text)
    # A line that parsed is valid UTF-8 without NUL bytes (app.ingest.lines.parse_line), so
    # its text is exactly its bytes decoded; it has no more characters than bytes, so only
    # a long one with multi-byte characters is counted (for the preview's threshold).
    n = len(raw)
    if n >= PREVIEW_MIN_CHARS and not raw.isascii():
        return (at, n), len(raw.decode("utf-8", errors="replace"))
    return (at, n), n


_CANONICAL = orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS


def _canonical(record: dict[str, Any]) -> bytes:
    return _dumps(record, _CANONICAL)


def _dumps(value: Any, option: int) -> bytes:
    # orjson stops at 254 levels and ingest reads 1024: deeper values take the deep encoder
    # (a TypeError costs nothing until it is raised, so the common case pays nothing)
    try:
        return orjson.dumps(value, option=option)
    except TypeError:
        return dumps_deep(value, sort_keys=bool(option & orjson.OPT_SORT_KEYS)).encode()


# Row builders: one per record type, positional tuples in STEP_COLS / CRITIC_COLS /
# EVENT_COLS order with the run id in `run_pk`'s place, for both dialects (PostgreSQL's portable path gets
# them zipped into dicts). Each value goes through a shortcut for the exact types the fast
# checks let through and falls back to the general function (`number_of`, `int_of`,
# `clean_text`) for anything else. A NUL can only reach a parsed string through a
# `\u0000` escape, so only lines with one (`scrub`) pay for NUL scrubbing: that walk was a
# tenth of the ingest time. `encode` says JSON values go to the driver as text (encoded
# by orjson) rather than as Python objects.
STEP_COLS = ("run_pk", "step", "ts", "duration_s", "tokens_input", "tokens_output", "tokens_total", "cost_usd",
             "retry", "critic_action", "critic_score", "record", "preview", "tool_calls")
CRITIC_COLS = ("run_pk", "step", "idx", "critic", "action", "effective_action", "reason", "score", "details")
EVENT_COLS = ("run_pk", "step", "phase", "ok", "ts", "digest", "record", "preview")
#: Where a step or event row keeps its record text, and a critic row its action and reason.
STEP_RECORD_AT = STEP_COLS.index("record")
EVENT_RECORD_AT = EVENT_COLS.index("record")
EVENT_DIGEST_AT = EVENT_COLS.index("digest")
CRITIC_ACTION_AT = CRITIC_COLS.index("action")
CRITIC_REASON_AT = CRITIC_COLS.index("reason")
_INT_MAX = 2**62


def _num_fast(v: Any) -> Optional[float]:
    t = type(v)
    if t is float:
        return v
    if t is int:
        return float(v)
    return None if v is None else number_of(v)


def _int_fast(v: Any) -> Optional[int]:
    if type(v) is int:
        return v if -_INT_MAX <= v <= _INT_MAX else None
    return None if v is None else int_of(v)


def _text_fast(v: Any, limit: Optional[int] = None) -> Optional[str]:
    if type(v) is str:
        return v if limit is None or len(v) <= limit else v[:limit]
    return clean_text(v, limit)


def _json_text(v: Any) -> str:
    try:  # inline, not through _dumps: three critic outputs a step on the ingest's hot path
        return orjson.dumps(v, option=orjson.OPT_NON_STR_KEYS).decode()
    except TypeError:
        return _dumps(v, orjson.OPT_NON_STR_KEYS).decode()


def _json_value(v: Any, scrub: bool, encode: bool) -> Any:
    if scrub:
        v = _json_safe(v)
    return _json_text(v) if encode else v


def step_row(run_id: str, step: int, rec: dict[str, Any], raw: Optional[bytes], *, scrub: bool,
             encode: bool, at: Optional[int] = None) -> tuple[tuple, list[tuple]]:
    """A step record's row and its critic-output rows (`run_id` in run_pk's place); `at`: see `_record_text`."""
    text = clean_text if scrub else _text_fast
    get = rec.get
    critics = []
    action_max = None
    score_mean = None
    outputs = get("critic_outputs")
    if outputs:
        rank = -1
        total: float = 0
        n = 0
        for i, o in enumerate(outputs):
            action = o.get("action")
            eff = effective_action(action)
            r = ACTION_RANK[eff]
            if r > rank:
                rank, action_max = r, eff
            score = o.get("score")
            if type(score) is not float:
                score = _num_fast(score)
            if score is not None:
                total += score
                n += 1
            reason = o.get("reason")
            critic = o.get("critic")
            details = o.get("details")
            critics.append((run_id, step, i, critic if not scrub and type(critic) is str else text(critic),
                            action if not scrub and type(action) is str else text(action), eff,
                            reason if not scrub and type(reason) is str else text(reason), score,
                            _json_value(details, scrub, encode) if details is not None or encode else None))
        if n:
            score_mean = total / n
    tokens = get("tokens")
    if tokens:
        t_in, t_out, t_total = tokens.get("input"), tokens.get("output"), tokens.get("total")
        t_in = t_in if type(t_in) is int and -_INT_MAX <= t_in <= _INT_MAX else _int_fast(t_in)
        t_out = t_out if type(t_out) is int and -_INT_MAX <= t_out <= _INT_MAX else _int_fast(t_out)
        t_total = t_total if type(t_total) is int and -_INT_MAX <= t_total <= _INT_MAX else _int_fast(t_total)
    else:
        t_in = t_out = t_total = None
    record, chars = _record_text(raw, rec, at)
    ts = get("ts")
    row = (run_id, step, ts if not scrub and type(ts) is str and len(ts) <= 100 else text(ts, 100),
           _num_fast(get("duration_s")), t_in, t_out, t_total, _num_fast(get("cost_usd")), bool(get("retry")),
           action_max, score_mean, record, make_preview(rec) if chars >= PREVIEW_MIN_CHARS else None,
           step_tool_calls(rec))
    return row, critics


def with_run_pk(rows: Iterable[tuple], pks: dict[str, int]) -> list[tuple]:
    """`rows` with each run id replaced by its run's key (the driver takes tuples)."""
    return [(pks[row[0]], *row[1:]) for row in rows]


def _array_length(holder: Any, key: str) -> Optional[int]:
    # SQLite's json_array_length(record, '$.key'): None when the key is absent (or its
    # holder is not an object), 0 for a value that is not an array.
    if type(holder) is not dict or key not in holder:
        return None
    value = holder[key]
    return len(value) if type(value) is list else 0


def step_tool_calls(rec: dict[str, Any]) -> Optional[int]:
    """The tool calls a step made: its `actions`, else `decision.actions`, else its
    `tool_invocations` (QitOS), as the run's figure counts them (the lab's
    `app.lab.state.step_tool_calls` reads the same lists); None when it lists none. Stored
    per step, so a run's total is a sum in SQL: it used to parse every step record of the
    run again in the database, a fifth of PostgreSQL's ingest time (migration 0015)."""
    actions = _array_length(rec, "actions")
    if actions:
        return actions
    decision = _array_length(rec.get("decision"), "actions")
    if decision:
        return decision
    return _array_length(rec, "tool_invocations")


def event_row(run_id: str, rtype: str, rec: dict[str, Any], raw: Optional[bytes], *, scrub: bool,
              at: Optional[int] = None) -> tuple:
    """The row (`run_id` in run_pk's place) of an `event` or of a record of a type this board does not
    know (kept as written, keyed by the digest of its content); `at`: see `_record_text`."""
    record, chars = _record_text(raw, rec, at)
    get = rec.get
    step = get("step")
    ok = get("ok")
    phase = get("phase") if rtype == "event" else f"[{rtype}]"
    ts = get("ts")
    if scrub:
        phase, ts = clean_text(phase, 200), clean_text(ts, 100)
    else:
        phase = phase if type(phase) is str and len(phase) <= 200 else _text_fast(phase, 200)
        ts = ts if ts is None or type(ts) is str and len(ts) <= 100 else _text_fast(ts, 100)
    try:  # orjson inline: most records are events (a call more per event is measurable)
        key = orjson.dumps(rec, option=_CANONICAL)
    except TypeError:  # nested past orjson's depth
        key = _dumps(rec, _CANONICAL)
    return (run_id, step if type(step) is int and -_INT_MAX <= step <= _INT_MAX else _int_fast(step), phase,
            ok if ok is True or ok is False else None, ts,
            sha1(key).hexdigest(), record,
            make_preview(rec) if chars >= PREVIEW_MIN_CHARS else None)


def criterion_row(pk: int, rec: dict[str, Any]) -> dict[str, Any]:
    """A criterion result's values (its position and spec come from run_start)."""
    score = number_of(rec.get("score"))
    passed = rec.get("passed") if isinstance(rec.get("passed"), bool) else None
    return {
        "run_pk": pk,
        "criterion_id": clean_text(rec["id"], 400),
        # A record with neither score nor passed (an undecided live verdict) grades nothing.
        "has_result": score is not None or passed is not None,
        "score": score,
        "passed": passed,
        "live_verdict": rec.get("live_verdict"),
        "decided_at_step": int_of(rec.get("decided_at_step")),
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
        "step": int_of(rec.get("step")),
        "tool_call_index": int_of(rec.get("tool_call_index")),
        "elapsed_s": number_of(rec.get("elapsed_s")),
        "turns_remaining": int_of(rec.get("turns_remaining")),
        "record": _json_safe(rec),
    }
