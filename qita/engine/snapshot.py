"""Agent state as the trace sees it: JSON-safe copies, the per-step state diff, engine-owned fields.

State can be any object (a dataclass, a dict, a slotted or frozen class); these helpers
never fail on it, because a trace must be written whatever the agent keeps.
"""

from __future__ import annotations

from typing import Any

import orjson

from ..writer import dumps_record


def jsonable(value: Any) -> Any:
    """A JSON-safe copy of `value` (the writer's fallback encoder handles odd objects)."""
    try:
        return orjson.loads(dumps_record(value))
    except Exception:
        return repr(value)


def snapshot(state: Any) -> dict[str, Any]:
    """The state's public fields, JSON-safe (the task is left out: it is in `run_start`)."""
    if isinstance(state, dict):
        items = state.items()
    elif hasattr(state, "__dict__"):
        items = vars(state).items()
    else:
        return {"value": jsonable(state)}
    public = {k: v for k, v in items if not str(k).startswith("_") and k != "task"}
    if all(isinstance(k, str) for k in public):
        # One round trip for the whole state (it runs twice a step); a field that cannot be
        # encoded sends it back to the field-by-field copy, where only that field becomes a repr.
        try:
            return orjson.loads(dumps_record(public))
        except Exception:
            pass
    return {k: jsonable(v) for k, v in public.items()}


def diff(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """`{key: {before, after}}` for every key whose value changed, in first-seen order."""
    out = {}
    for key in list(before) + [k for k in after if k not in before]:
        b, a = before.get(key), after.get(key)
        if b != a:
            out[key] = {"before": b, "after": a}
    return out


def set_field(obj: Any, name: str, value: Any) -> None:
    """Write one of the engine's bookkeeping fields (`stop_reason`, `step`, ...) on the state."""
    if obj is None:
        return
    try:
        if isinstance(obj, dict):
            obj[name] = value
        else:
            setattr(obj, name, value)
    except Exception:
        pass  # frozen or slotted states simply do not get the engine's bookkeeping fields
