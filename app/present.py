"""Presentation helpers shared by templates, exports and the JSON twins.

Everything here turns stored values into text; Jinja autoescaping then makes that
text inert. Nothing here ever marks trace data as safe HTML.
"""

from __future__ import annotations

import math
from datetime import datetime, timezone
from typing import Any, Optional

import orjson

from qita.format import STOP_REASONS

#: One label per stop reason (badges carry text, not only color).
STOP_REASON_LABELS = {
    "success": "success",
    "final": "final answer",
    "budget_steps": "step budget",
    "budget_time": "time budget",
    "budget_tokens": "token budget",
    "critic_stop": "critic stop",
    "stagnation": "stagnation",
    "agent_condition": "agent condition",
    "env_terminal": "env terminal",
    "task_validation_failed": "task validation failed",
    "env_capability_mismatch": "env capability mismatch",
    "unrecoverable_error": "unrecoverable error",
    "early_stop": "early stop",
}
assert set(STOP_REASON_LABELS) == set(STOP_REASONS)

EARLY_STOP_REASON_LABELS = {
    "criterion_passed": "armed criterion passed",
    "criterion_failed": "armed criterion failed",
    "decision_budget_exceeded": "decision budget exceeded",
}


def stop_reason_info(value: Optional[str]) -> dict[str, Any]:
    """How to show a stop reason: label, css key, and whether it is unknown."""
    if value is None:
        return {"value": None, "label": "no stop reason", "key": "none", "known": True}
    if value in STOP_REASON_LABELS:
        return {"value": value, "label": STOP_REASON_LABELS[value], "key": value, "known": True}
    return {"value": value, "label": value, "key": "unknown", "known": False}


def fmt_int(value: Any) -> str:
    if value is None:
        return "—"
    try:
        return f"{int(value):,}"
    except (TypeError, ValueError):
        return str(value)


def _numeric(fmt):
    """Wrap a formatter of floats: None shows as a dash, a non-number as written."""
    def wrapper(value: Any, *args: Any) -> str:
        if value is None:
            return "—"
        try:
            v = float(value)
        except (TypeError, ValueError):
            return str(value)
        return fmt(v, *args)

    wrapper.__name__, wrapper.__doc__ = fmt.__name__, fmt.__doc__
    return wrapper


@_numeric
def fmt_num(v: float, digits: int = 2) -> str:
    if math.isnan(v) or math.isinf(v):
        return str(v)
    if v == int(v) and abs(v) < 1e15:
        return f"{int(v):,}"
    return f"{v:,.{digits}f}"


@_numeric
def fmt_score(v: float) -> str:
    """A score or threshold with two decimals, so 1.00 and 0.85 line up in a column."""
    return f"{v:.2f}" if math.isfinite(v) else str(v)


@_numeric
def fmt_duration(s: float) -> str:
    if s < 0:
        return "-" + fmt_duration(-s)  # shown as written (the ingest flagged it)
    if s < 1:
        return f"{s * 1000:.0f} ms"
    if s < 10:
        # Two decimals below 10 s: "8.25 s" must not read as "8.2 s".
        return f"{s:.2f} s"
    if s < 60:
        return f"{s:.1f} s"
    if s < 3600:
        return f"{int(s // 60)} min {int(s % 60)} s"
    return f"{int(s // 3600)} h {int(s % 3600 // 60)} min"


def fmt_bytes(value: Any) -> str:
    """A size in bytes for people: 1 GiB, 4.5 MiB, 812 bytes."""
    if value is None:
        return "—"
    n = float(value)
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{int(n)} {unit}" if unit == "bytes" or n == int(n) else f"{n:.1f} {unit}"
        n /= 1024
    return str(value)


def fmt_pct(value: Any) -> str:
    if value is None:
        return "—"
    return f"{float(value) * 100:.0f}%"


def fmt_usd(value: Any) -> str:
    if value is None:
        return "—"
    v = float(value)
    return f"${v:,.4f}" if v < 1 else f"${v:,.2f}"


def fmt_dt(value: Any) -> str:
    """A stored time (always UTC) to the second, saying so."""
    if value is None:
        return "—"
    if isinstance(value, datetime):
        if value.tzinfo is not None:
            value = value.astimezone(timezone.utc)
        return value.strftime("%Y-%m-%d %H:%M:%S") + " UTC"
    return str(value)


def fmt_iso(value: Any) -> str:
    """A stored time as full ISO 8601 with its UTC offset (for a title attribute)."""
    if value is None:
        return ""
    if isinstance(value, datetime):
        return (value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value.astimezone(timezone.utc)).isoformat()
    return str(value)


def to_json_text(value: Any, *, indent: bool = True) -> str:
    """Pretty JSON text for a raw view (escaped by the template like any text)."""
    if isinstance(value, str):
        return value
    from .jsontext import dumps

    return dumps(value, option=orjson.OPT_INDENT_2 if indent else 0).decode()


def gauge(used: Any, limit: Any) -> Optional[dict[str, Any]]:
    """A budget gauge: how much of a limit was used (None when there is no limit)."""
    if limit in (None, 0) or used is None:
        return None
    try:
        frac = float(used) / float(limit)
    except (TypeError, ValueError, ZeroDivisionError):
        return None
    level = "over" if frac > 1 else "high" if frac >= 0.8 else "ok"
    return {"used": used, "limit": limit, "fraction": frac, "pct": min(100, round(frac * 100)), "level": level}


def truncate(text: Any, limit: int = 2000) -> tuple[str, bool]:
    """(the first `limit` characters, whether more was cut)."""
    s = text if isinstance(text, str) else to_json_text(text)
    if len(s) <= limit:
        return s, False
    return s[:limit], True


#: Keys of a criterion's details that name steps, and those that name tool calls (1-based).
EVIDENCE_STEP_KEYS = ("step", "steps", "at_step", "decided_at_step", "step_indexes")
EVIDENCE_CALL_KEYS = ("tool_call_index", "tool_call_indexes", "call_index", "call_indexes")
EVIDENCE_MAX = 20


def _ints(value: Any) -> list[int]:
    items = value if isinstance(value, list) else [value]
    return [v for v in items if isinstance(v, int) and not isinstance(v, bool)]


def criterion_evidence(criterion: dict[str, Any]) -> dict[str, list[int]]:
    """The steps and tool calls a criterion points at (its `decided_at_step` and the step
    and tool-call numbers in its details), each once, in order, at most EVIDENCE_MAX."""
    details = criterion.get("details") if isinstance(criterion.get("details"), dict) else {}
    steps = _ints(criterion.get("decided_at_step"))
    calls: list[int] = []
    for key in EVIDENCE_STEP_KEYS:
        steps += _ints(details.get(key))
    for key in EVIDENCE_CALL_KEYS:
        calls += _ints(details.get(key))
    return {"steps": list(dict.fromkeys(s for s in steps if s >= 0))[:EVIDENCE_MAX],
            "calls": list(dict.fromkeys(c for c in calls if c >= 1))[:EVIDENCE_MAX]}
