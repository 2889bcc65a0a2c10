"""Previews of large records: what step blocks, run pages and the HTML export read instead.

A step or event record longer than PREVIEW_MIN_CHARS is stored twice: as written
(`record`, for field views and the JSONL export) and as a preview (`preview`) in which
every string longer than PREVIEW_STRING_CHARS is cut with a note saying how long it was,
and every list or object past PREVIEW_ITEMS entries is cut too. Pages read
`coalesce(preview, record)`, so one request never loads a 60 MB value: before, one
`GET /api/runs/{id}/steps?limit=200` of ten 60 MB steps peaked at 2.56 GB.
"""

from __future__ import annotations

from typing import Any, Optional

import orjson

from .secrets import cut_point

#: Records at least this long (characters of their JSON text) get a preview.
PREVIEW_MIN_CHARS = 256 * 1024
#: Longest string kept whole in a preview (a page shows at most 2,000 characters of one).
PREVIEW_STRING_CHARS = 16 * 1024
#: Most items kept of one list or object in a preview.
PREVIEW_ITEMS = 500
#: Nesting followed; deeper values are replaced by a note.
PREVIEW_DEPTH = 64


def preview_note(total: int, what: str = "characters") -> str:
    """The text that ends a cut value in a preview."""
    return f"… [cut: {total:,} {what} in all; the field view and the JSONL export have it whole]"


def _cut(value: Any, depth: int) -> Any:
    if isinstance(value, str):
        if len(value) <= PREVIEW_STRING_CHARS:
            return value
        # Cut where no secret is split, so masking the preview masks every secret it shows.
        return value[:cut_point(value, 0, PREVIEW_STRING_CHARS)] + preview_note(len(value))
    if isinstance(value, dict):
        if depth >= PREVIEW_DEPTH:
            return preview_note(len(value), "keys (nested too deep for the preview)")
        out = {}
        for i, (k, v) in enumerate(value.items()):
            if i >= PREVIEW_ITEMS:
                out["…"] = preview_note(len(value), "keys")
                break
            out[k] = _cut(v, depth + 1)
        return out
    if isinstance(value, list):
        if depth >= PREVIEW_DEPTH:
            return preview_note(len(value), "items (nested too deep for the preview)")
        items = [_cut(v, depth + 1) for v in value[:PREVIEW_ITEMS]]
        if len(value) > PREVIEW_ITEMS:
            items.append(preview_note(len(value), "items"))
        return items
    return value


def make_preview(record: Any) -> str:
    """The preview JSON text of a parsed record."""
    return orjson.dumps(_cut(record, 0), option=orjson.OPT_NON_STR_KEYS).decode()


def preview_for(raw_len: int, record: Any) -> Optional[str]:
    """The preview of a record whose text is `raw_len` long, or None when it is small enough to read whole."""
    return make_preview(record) if raw_len >= PREVIEW_MIN_CHARS else None


def preview_text(text: Optional[str]) -> Optional[str]:
    """The preview of a stored record text (None when small or not JSON)."""
    if text is None or len(text) < PREVIEW_MIN_CHARS:
        return None
    try:
        return make_preview(orjson.loads(text))
    except orjson.JSONDecodeError:
        return text[:cut_point(text, 0, PREVIEW_STRING_CHARS)] + preview_note(len(text))
