"""Presentation helpers shared by templates, exports and the JSON twins.

Everything here turns stored values into text; Jinja autoescaping then makes that
text inert. Nothing here ever marks trace data as safe HTML.
"""

from __future__ import annotations

import math
from datetime import datetime, timezone
from typing import Any, Optional

import orjson

from qita.format import LIVE_VERDICTS, STOP_REASONS

from . import words

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
    "budget_cost": "cost budget",
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


#: Past this, a figure is written in powers of ten ("1.0e+308"): trace text can give any
#: magnitude, and 1e308 written out in full was 309 digits that widened a run page to
#: 2,957 px (no real count, cost or time comes near it).
HUGE = 1e15


def _huge(v: float) -> str:
    return f"{v:.1e}"


def fmt_int(value: Any) -> str:
    if value is None:
        return "—"
    try:
        if isinstance(value, float) and math.isfinite(value) and abs(value) >= HUGE:
            return _huge(value)
        n = int(value)
    except (TypeError, ValueError, OverflowError):
        return str(value)
    return _huge(float(n)) if abs(n) >= HUGE else f"{n:,}"


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
    if abs(v) >= HUGE:
        return _huge(v)
    if v == int(v):
        return f"{int(v):,}"
    return f"{v:,.{digits}f}"


@_numeric
def fmt_score(v: float) -> str:
    """A score or threshold with two decimals, so 1.00 and 0.85 line up in a column."""
    return (f"{v:.2f}" if abs(v) < HUGE else _huge(v)) if math.isfinite(v) else str(v)


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
    if not math.isfinite(s) or s / 3600 >= HUGE:
        return f"{_huge(s / 3600)} h" if math.isfinite(s) else str(s)
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


def fmt_whole(value: Any) -> str:
    """A figure already in percent (a saving, its interval's bounds) to a whole number, a
    negative one with a true minus sign ("−12", as compare's changes read), never "-12"."""
    if value is None or not math.isfinite(float(value)):
        return "—"
    whole = round(float(value))
    return f"−{-whole}" if whole < 0 else str(whole)


def fmt_usd(value: Any) -> str:
    if value is None:
        return "—"
    v = float(value)
    if v < 0:
        return "-" + fmt_usd(-v)  # shown as written (the ingest flagged it), the sign before the $
    if not math.isfinite(v) or v >= HUGE:
        return f"${_huge(v)}" if math.isfinite(v) else str(v)
    return f"${v:,.4f}" if v < 1 else f"${v:,.2f}"


#: Producers whose run times name no zone: coder_eval's result models stamp them with
#: `datetime.now` (its machine's local clock) and its own report prints them bare
#: (run.md: "**Date**: 2026-12-01 02:27:21"). The board shows them as written, not as UTC.
ZONELESS_SOURCES = frozenset({"coder_eval"})


def fmt_dt(value: Any, source: Optional[str] = None) -> str:
    """A stored time (always UTC) to the second, saying so; the time of a run from a
    producer in ZONELESS_SOURCES as it wrote it, with no zone."""
    if value is None:
        return "—"
    if isinstance(value, datetime):
        if source in ZONELESS_SOURCES:
            return value.strftime("%Y-%m-%d %H:%M:%S")
        if value.tzinfo is not None:
            value = value.astimezone(timezone.utc)
        return value.strftime("%Y-%m-%d %H:%M:%S") + " UTC"
    return str(value)


def fmt_iso(value: Any, source: Optional[str] = None) -> str:
    """A stored time as full ISO 8601 with its UTC offset (for a title attribute); with no
    offset for a run from a producer in ZONELESS_SOURCES (HTML reads that as local time)."""
    if value is None:
        return ""
    if isinstance(value, datetime):
        if source in ZONELESS_SOURCES:
            return value.replace(tzinfo=None).isoformat()
        return (value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value.astimezone(timezone.utc)).isoformat()
    return str(value)


def to_json_text(value: Any, *, indent: bool = True) -> str:
    """Pretty JSON text for a raw view (escaped by the template like any text)."""
    if isinstance(value, str):
        return value
    from .jsontext import dumps

    text = dumps(value, option=orjson.OPT_INDENT_2 if indent else 0).decode()
    # A direction control inside a key or a string turned the block's own quotes and colons
    # around it ("key\u202e": ... read `"key"lav" :"`): written as its JSON escape instead,
    # the same JSON, and nothing in trace text can reorder what follows it.
    return words.BIDI.sub(lambda m: f"\\u{ord(m.group()):04x}", text) if words.BIDI.search(text) else text


def gauge(used: Any, limit: Any) -> Optional[dict[str, Any]]:
    """A budget gauge: how much of a limit was used (None when there is no limit)."""
    if limit in (None, 0) or used is None:
        return None
    try:
        if float(limit) <= 0:
            return None  # a negative limit limits nothing (the ingest warned): no bar of "-3 of -5"
        frac = float(used) / float(limit)
    except (TypeError, ValueError, ZeroDivisionError, OverflowError):
        return None
    if not math.isfinite(frac):
        return None
    # capped for the page's percentage (a used figure of 1e308 is 1e310 %, past int's reach)
    frac = max(-1e6, min(frac, 1e6))
    level = "over" if frac > 1 else "high" if frac >= 0.8 else "ok"
    return {"used": used, "limit": limit, "fraction": frac, "pct": min(100, round(frac * 100)), "level": level}


def _sum(*values: Any) -> Optional[float]:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def token_parts(run: dict[str, Any]) -> Optional[dict[str, Any]]:
    """A run's tokens by bucket, each counted once: uncached input, cache write, cache read,
    output. None when the run recorded no cache buckets (its input is then all there is)."""
    read, write = run.get("tokens_cache_read"), run.get("tokens_cache_write")
    if read is None and write is None:
        return None
    tin = run.get("tokens_input")
    uncached = None if tin is None else tin - (read or 0) - (write or 0)
    return {"uncached_input": uncached, "cache_write": write, "cache_read": read, "output": run.get("tokens_output"),
            "total": run.get("tokens_total")}


def budget_tokens_used(run: dict[str, Any], counted: Optional[list[str]]) -> Optional[int]:
    """The tokens a run's token cap counts: every token, unless the budget names its buckets
    (coder_eval counts uncached input and output unless told to count the caches)."""
    if not counted:
        return run.get("tokens_total")
    parts = token_parts(run) or {"uncached_input": run.get("tokens_input"), "cache_read": None, "cache_write": None}
    values = {"uncached_input": parts["uncached_input"], "cache_read": parts["cache_read"],
              "cache_write": parts["cache_write"], "output": run.get("tokens_output")}
    used = _sum(*(values.get(b) for b in counted))
    return int(used) if used is not None else None


def budget_gauges(run: dict[str, Any]) -> list[dict[str, Any]]:
    """The budget gauges of a run: steps, tokens and time always (a limit or "no limit"),
    input / output tokens and cost when the run set a cap on them."""
    budget = (run.get("start_record") or {}).get("budget") if isinstance(run.get("start_record"), dict) else None
    budget = budget if isinstance(budget, dict) else {}
    counted = budget.get("tokens_counted") if isinstance(budget.get("tokens_counted"), list) else None
    parts = token_parts(run) or {}
    time_used = run.get("agent_elapsed_s") if run.get("agent_elapsed_s") is not None else run.get("elapsed_s")
    time_label, time_note = "time", None
    if (run.get("stop_reason") == "budget_time" and time_used is not None and run.get("elapsed_s") is not None
            and run["elapsed_s"] > time_used):
        # The agent's own time adds up the calls that finished: the one the time limit cut
        # off is missing from it (a coder_eval TIMEOUT read 40 s of a 600 s limit).
        time_note = f"the run timed out; the agent's own time, {fmt_duration(time_used)}, leaves out the call cut off"
        time_used, time_label = run["elapsed_s"], "time (end to end)"
    time_gauge = gauge(time_used, run.get("budget_max_runtime_s"))
    if run.get("stop_reason") == "budget_time" and (time_gauge is None or time_gauge["level"] == "ok"):
        # a time-limit stop well under the run's own time limit (below the "high" mark): another
        # limit ended it
        call_limit = budget.get("max_call_seconds")
        call = (f"each agent call's limit, {fmt_duration(call_limit)}" if isinstance(call_limit, (int, float))
                and not isinstance(call_limit, bool) and call_limit > 0 else "a limit this gauge does not measure")
        time_note = (time_note + "; " if time_note else "") + f"the time limit that stopped it is {call}"
    token_note = None if not counted else "counted: " + " + ".join(b.replace("_", " ") for b in counted)
    steps, steps_label, steps_note = run.get("steps"), "steps", None
    longest = budget.get("steps_longest_iteration")
    if budget.get("max_steps_scope") == "iteration" and isinstance(longest, int) and not isinstance(longest, bool):
        # the cap is per agent call (a dialog's exchange, a crash's retry): the run's total is not what it caps
        steps, steps_label = longest, "steps (longest call)"
        steps_note = f"the limit caps each agent call; {fmt_int(run.get('steps'))} steps in all"
    out = [
        {"name": "steps", "label": steps_label, "note": steps_note,
         "gauge": gauge(steps, run.get("budget_max_steps")),
         "used": fmt_int(steps), "limit": fmt_int(run.get("budget_max_steps"))},
        {"name": "tokens", "label": "tokens", "note": token_note,
         "gauge": gauge(budget_tokens_used(run, counted), run.get("budget_max_tokens")),
         "used": fmt_int(budget_tokens_used(run, counted)), "limit": fmt_int(run.get("budget_max_tokens"))},
        {"name": "time", "label": time_label, "note": time_note, "gauge": time_gauge,
         "used": fmt_duration(time_used), "limit": fmt_duration(run.get("budget_max_runtime_s"))},
    ]
    for key, label, used in (
            ("max_input_tokens", "input tokens",
             _sum(parts.get("uncached_input") if parts else run.get("tokens_input"),
                  parts.get("cache_read") if counted and "cache_read" in counted else None,
                  parts.get("cache_write") if counted and "cache_write" in counted else None)),
            ("max_output_tokens", "output tokens", run.get("tokens_output"))):
        limit = budget.get(key)
        if isinstance(limit, int) and not isinstance(limit, bool):
            out.append({"name": key, "label": label, "gauge": gauge(used, limit), "used": fmt_int(used),
                        "limit": fmt_int(limit)})
    if run.get("budget_max_cost_usd") is not None:
        # The agent's slice is what the budget gates on: unpriced (None) stays unpriced, and
        # the judges' share of the bill never stands in for it (app.derive already reads a
        # run that names no slice as all agent).
        cost = run["agent_cost_usd"] if "agent_cost_usd" in run else run.get("cost_usd")
        out.append({"name": "cost", "label": "cost (agent)", "gauge": gauge(cost, run.get("budget_max_cost_usd")),
                    "used": fmt_usd(cost) if cost is not None else "unpriced",
                    "limit": fmt_usd(run.get("budget_max_cost_usd"))})
    return out


def truncate(text: Any, limit: int = 2000) -> tuple[str, bool]:
    """(the first `limit` characters, whether more was cut)."""
    s = text if isinstance(text, str) else to_json_text(text)
    if len(s) <= limit:
        return s, False
    return s[:limit], True


def critic_patches(record: Any) -> list[Any]:
    """Each critic output's `patches` in a step record (None where it has none), in output order."""
    outputs = record.get("critic_outputs") if isinstance(record, dict) else None
    if not isinstance(outputs, list):
        return []
    return [o.get("patches") if isinstance(o, dict) else None for o in outputs]


def live_verdict_items(record: Any) -> list[dict[str, Any]]:
    """A step's recorded live verdicts (`live_verdicts`) as badges: id, verdict as written, badge style.

    Undecided (and anything a reader cannot vouch for) gets the pending style, so only
    a real pass or fail is ever shown as one.
    """
    verdicts = record.get("live_verdicts") if isinstance(record, dict) else None
    if not isinstance(verdicts, dict):
        return []
    return [{"id": str(cid), "verdict": v, "known": v in LIVE_VERDICTS, "css": v if v in ("pass", "fail") else "pending"}
            for cid, v in verdicts.items()]


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


# -- the run header's setup panel and verdict lane ------------------------------------------
# Templates show what these give; the type checks and the pointer paths (where the whole
# value of a cut one is loaded from, app.queries.run_detail.get_run_field) are decided here.

#: How the run header says what its verdict was gated on (derive.derive_verdict's gated_on).
GATED_ON_LABELS = {"armed": "armed criteria only", "all": "all gating criteria", "none": "no criteria"}


def _is_list(value: Any) -> bool:
    return isinstance(value, (list, tuple))


def _shown(value: Any, *path: Any) -> dict[str, Any]:
    """A value the page shows (cut when long) and the pointer path of its whole self."""
    return {"value": value, "path": ("run", *path)}


def critics_setup(critics: Any) -> Optional[dict[str, Any]]:
    """The run's declared critics: a list (names as tags, anything else as a value) or one value."""
    if critics is None:
        return None
    if not _is_list(critics):
        return {"items": None, "whole": _shown(critics, "critics")}
    items = [{"name": c} if isinstance(c, str) else _shown(c, "critics", i) for i, c in enumerate(critics)]
    return {"items": items, "whole": None}


def stop_criteria_setup(stop_criteria: Any) -> Optional[dict[str, Any]]:
    """The run's stop criteria: a list (named ones with their params, anything else as a value) or one value."""
    if stop_criteria is None:
        return None
    if not _is_list(stop_criteria):
        return {"items": None, "whole": _shown(stop_criteria, "stop_criteria")}
    items = []
    for i, sc in enumerate(stop_criteria):
        if isinstance(sc, dict) and sc.get("name") is not None:
            params = sc.get("params")
            items.append({"name": sc["name"],
                          "params": _shown(params, "stop_criteria", i, "params") if params not in (None, {}) else None})
        else:
            items.append({"name": None, "whole": _shown(sc, "stop_criteria", i)})
    return {"items": items, "whole": None}


def failure_report_view(report: Any) -> Optional[dict[str, Any]]:
    """The run's failure report: its failures listed, its other fields, or the value as written.

    `kind` is `listed` (a mapping with a `failures` list), `empty` (an empty mapping: the
    run recorded no failures here) or `value` (anything else, shown as written).
    """
    if report is None:
        return None
    failures = report.get("failures") if isinstance(report, dict) else None
    count = report.get("failure_count") if isinstance(report, dict) else None
    if count is None and _is_list(failures):
        count = len(failures)
    if _is_list(failures):
        others = [{"key": k, **_shown(v, "failure_report", k)} for k, v in sorted(report.items(), key=lambda kv: str(kv[0]))
                  if k not in ("failures", "failure_count")]
        return {"kind": "listed", "count": count,
                "failures": [_shown(f, "failure_report", "failures", i) for i, f in enumerate(failures)],
                "others": others}
    if isinstance(report, dict) and not report:
        return {"kind": "empty", "count": count}
    return {"kind": "value", "count": count, "whole": _shown(report, "failure_report")}


def run_setup(run: dict[str, Any]) -> Optional[dict[str, Any]]:
    """The run header's "Setup and report" panel, or None when the trace recorded none of it."""
    setup = {"critics": critics_setup(run.get("critics")),
             "stop_criteria": stop_criteria_setup(run.get("stop_criteria")),
             "meta": _shown(run["meta"], "meta") if run.get("meta") is not None else None,
             "failure_report": failure_report_view(run.get("failure_report"))}
    return setup if any(v is not None for v in setup.values()) else None


#: The letter a verdict-lane mark shows for its critic action (– when no critic spoke).
LANE_LABELS = {"stop": "S", "retry": "R", "continue": "·"}


def _score_class(score: Any) -> str:
    """The lane's score bar in tenths, s0 to s10 (a score outside [0, 1] as its nearest end;
    a critic's 1e308 made the run page a 500)."""
    if not isinstance(score, (int, float)) or isinstance(score, bool) or not math.isfinite(score):
        return "sx"
    return f"s{round(min(1.0, max(0.0, score)) * 10)}"


def lane_mark(mark: dict[str, Any]) -> dict[str, Any]:
    """One verdict-lane mark as the page draws it: its steps, label, score bar and title."""
    score = mark.get("score")
    steps = f"{mark['step']}" + (f"–{mark['last']}" if mark.get("last") not in (None, mark["step"]) else "")
    title = f"step {steps}: {mark.get('action') or 'no critic'}" + (f" {fmt_score(score)}" if score is not None else "")
    return {"step": mark["step"], "action": mark.get("action") or "none", "retried": bool(mark.get("retry")),
            "label": LANE_LABELS.get(mark.get("action"), "–"),
            "score_class": _score_class(score),
            "title": title}


def suggested_pair(variants: list[str], asked: Any = None) -> Optional[tuple[str, str]]:
    """The comparison an error answer suggests among an experiment's variants: the side the
    visitor asked for first when it exists (`?a=smoke&b=nosuch` suggests smoke with its
    partner, never the reverse), else compare's own default pick (smoke with e2e)."""
    names = [v for v in variants if isinstance(v, str)]
    if len(names) < 2:
        return None
    first = asked.get("a", {}).get("value") if isinstance(asked, dict) and isinstance(asked.get("a"), dict) else None
    if first in names:
        rest = [v for v in names if v != first]
        partner = "e2e" if "e2e" in rest and first != "e2e" else rest[0]
        return first, partner
    from .compare import choose_default

    pick = choose_default({"": names})
    return (pick[1], pick[2]) if pick else None
