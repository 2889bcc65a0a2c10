"""JSON text at any depth: orjson first, an explicit-stack encoder past its depth limit.

Traces may nest deeper than orjson's recursion limit (about 254 levels); the board must
still show, export and serve such values, so every JSON writer falls back to
`dumps_deep`, which never recurses.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

import orjson


def dumps(value: Any, *, option: int = 0) -> bytes:
    """orjson.dumps with these options (non-string keys allowed), or the deep encoder when orjson gives up."""
    try:
        return orjson.dumps(value, option=option | orjson.OPT_NON_STR_KEYS, default=_default)
    except TypeError:
        return dumps_deep(value).encode()


def column_text(value: Any) -> str:
    """A JSON column's text as the board's engines write it (`app.db.make_engine`): compact
    orjson, or the standard library's `json.dumps`, SQLAlchemy's own default, for what
    orjson refuses (an integer past 64 bits, a lone surrogate). `json.dumps` of the run
    columns a batch of 1,730 five-step runs updates took 0.25 s of the writer's 0.88 s in
    those updates (cProfile; docs/performance.md, section 11)."""
    try:
        return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()
    except TypeError:
        try:
            return json.dumps(value)
        except RecursionError:
            return dumps_deep(value)  # deeper than Python's stack: ingest reads 1024 levels


def column_load(text: Any) -> Any:
    """A JSON column's value as the SQLite engine reads it back: orjson (1024 levels, where
    the standard library's json.loads runs out of stack first), or json.loads for what
    orjson refuses (an integer past 64 bits, which `column_text` may have written)."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)


def _default(obj: Any) -> Any:
    if hasattr(obj, "isoformat"):
        return obj.isoformat()
    if isinstance(obj, (set, frozenset)):
        return sorted(obj, key=str)
    return str(obj)


_ATOMS = {True: "true", False: "false"}


def _atom(value: Any) -> str:
    if value is None or value is True or value is False:
        return "null" if value is None else _ATOMS[value]
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, int):
        return str(int(value))
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else "null"  # as orjson: JSON has no NaN/Infinity
    if hasattr(value, "isoformat"):
        return json.dumps(value.isoformat())
    return json.dumps(str(value), ensure_ascii=False)


def _key(key: Any) -> str:
    # As orjson's OPT_NON_STR_KEYS: a non-string key is written as its JSON text, quoted.
    return _atom(key if isinstance(key, str) else _atom(key).strip('"'))


def dumps_deep(value: Any, *, sort_keys: bool = False) -> str:
    """Compact JSON of `value` at any depth, written with an explicit stack (no recursion);
    `sort_keys` as orjson's OPT_SORT_KEYS (a record's identity is its sorted JSON)."""
    out: list[str] = []
    # Each frame: the container's remaining items, whether it is a dict, whether an item was written.
    stack: list[list[Any]] = []

    def open_(v: Any) -> None:
        if isinstance(v, dict):
            out.append("{")
            items = sorted(v.items(), key=lambda kv: _key(kv[0])) if sort_keys else v.items()
            stack.append([iter(items), True, False])
        elif isinstance(v, (list, tuple)):
            out.append("[")
            stack.append([iter(v), False, False])
        else:
            out.append(_atom(v))

    open_(value)
    while stack:
        frame = stack[-1]
        items, is_dict, started = frame
        item = next(items, _END)
        if item is _END:
            out.append("}" if is_dict else "]")
            stack.pop()
            continue
        if started:
            out.append(",")
        frame[2] = True
        if is_dict:
            out.append(_key(item[0]) + ":")
            open_(item[1])
        else:
            open_(item)
    return "".join(out)


_END = object()


def column_value(value: Any) -> Any:
    """A JSON column's value whether the driver parsed it (PostgreSQL) or handed over its
    text (SQLite rows read straight from the driver); None when the text is not JSON."""
    if isinstance(value, (str, bytes)):
        try:
            return orjson.loads(value)
        except orjson.JSONDecodeError:
            return None
    return value


def stored_value(text: Any) -> Any:
    """A stored record's JSON text parsed; the text itself when it is not JSON (shown as
    stored rather than lost), and a value the driver already parsed as it is."""
    if text is None or not isinstance(text, (str, bytes)):
        return text
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return text


def nul_safe(value: Any) -> Any:
    """A JSON value with NUL characters in strings and keys replaced by U+FFFD, as the store
    keeps them (PostgreSQL's json and text reject NUL); the value itself when it holds none.

    Whether it holds one is asked of its JSON text first (orjson writes NUL as `\\u0000`):
    a few microseconds for a record, against tens to copy it, which run starts, ends and
    criteria paid for every record (a tenth of the writer's time on short runs)."""
    if isinstance(value, (dict, list)):
        try:
            if b"\\u0000" not in orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS):
                return value
        except (TypeError, orjson.JSONEncodeError):
            # past orjson's depth, or not JSON through and through (an integer past 64
            # bits): the deep encoder says whether there is a NUL; walked below if so
            if "\\u0000" not in dumps_deep(value):
                return value
    try:
        return _nul_scrubbed(value)
    except RecursionError:
        # deeper than Python's stack (ingest reads 1024 levels): scrubbed as JSON text
        # only an escape, not the text "\u0000" (written "\\u0000": an odd run of backslashes)
        return orjson.loads(_NUL_ESCAPE.sub(r"\1\\ufffd", dumps_deep(value)))


_NUL_ESCAPE = re.compile(r"(?<!\\)((?:\\\\)*)\\u0000")


def _nul_scrubbed(value: Any) -> Any:
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd") if "\x00" in value else value
    if isinstance(value, list):
        return [_nul_scrubbed(v) for v in value]
    if isinstance(value, dict):
        return {(_nul_scrubbed(k) if isinstance(k, str) else k): _nul_scrubbed(v) for k, v in value.items()}
    return value
